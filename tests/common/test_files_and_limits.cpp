// Issue 10: files readers may open at any moment appear whole or not at all
// (tmp + rename, item 6), and a thread count is refused before any thread
// starts (item 2).
#define BOOST_TEST_MODULE files_and_limits
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/npy.hpp"
#include "common/thread_pool.hpp"

using namespace trillion;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("trillion-files-" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string operator/(const std::string& n) const { return (path / n).string(); }
  size_t entries() const { return size_t(std::distance(fs::directory_iterator(path), fs::directory_iterator())); }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

BOOST_AUTO_TEST_CASE(logits_file_appears_only_when_complete) {
  Dir d;
  const std::string path = d / "req.npy";
  const std::vector<float> row(4, 1.5f);
  {
    NpyRowWriter w(path, 2, 4);
    w.append(row.data(), 1);
    BOOST_TEST(!fs::exists(path));  // half written: not under its name
    w.append(row.data(), 1);
    w.close();
  }
  BOOST_TEST(fs::file_size(path) == 128u + 2 * 4 * sizeof(float));
  BOOST_TEST(d.entries() == 1u);  // no temporary left
  {
    NpyRowWriter w(d / "torn.npy", 2, 4);
    w.append(row.data(), 1);
  }  // a request that failed midway: nothing at all
  BOOST_TEST(!fs::exists(d / "torn.npy"));
  BOOST_TEST(d.entries() == 1u);
}

BOOST_AUTO_TEST_CASE(writing_replaces_a_symlink_instead_of_following_it) {
  Dir d;
  std::ofstream(d / "victim") << "keep";
  fs::create_symlink(d / "victim", d / "metrics.json");
  write_file_atomically(d / "metrics.json", "{}\n");
  BOOST_TEST(slurp(d / "victim") == "keep");
  BOOST_TEST(!fs::is_symlink(d / "metrics.json"));
  BOOST_TEST(slurp(d / "metrics.json") == "{}\n");
  fs::create_symlink(d / "victim", d / "x.npy");
  const float v[2] = {1, 2};
  write_npy_f32(d / "x.npy", v, {2});
  BOOST_TEST(slurp(d / "victim") == "keep");
  BOOST_TEST(!fs::is_symlink(d / "x.npy"));
}

BOOST_AUTO_TEST_CASE(temp_names_differ_per_process) {
  BOOST_TEST(temp_path_for("/a/m.json") == "/a/m.json.partial-" + std::to_string(::getpid()));
}

BOOST_AUTO_TEST_CASE(thread_pool_refuses_too_many_threads_before_starting_one) {
  const int limit = thread_limit();
  BOOST_TEST(limit >= 64);
  BOOST_TEST(limit <= kMaxThreads);
  // Refused in the constructor's first lines, before any thread starts.
  // (One over the limit, not 100000: code without the check would start
  // them all, and pid_max here is 32768.)
  BOOST_CHECK_THROW(ThreadPool(limit + 1), Error);
  ThreadPool ok(2);
  BOOST_TEST(ok.size() == 2);
}

#define BOOST_TEST_MODULE common
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/npy.hpp"
#include "common/numeric.hpp"
#include "common/thread_pool.hpp"

using namespace trillion;

namespace {
// A predicate for BOOST_CHECK_EXCEPTION: the error's message holds `part`.
auto says(std::string part) {
  return [part](const std::exception& e) {
    const bool ok = std::string(e.what()).find(part) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("'" << part << "' not in: " << e.what());
    return ok;
  };
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

BOOST_AUTO_TEST_CASE(npy_layout_matches_the_format_spec) {
  const std::string path = "test_common_a.npy";
  const float data[6] = {1, 2, 3, 4, 5, 6};
  write_npy_f32(path, data, {2, 3});
  const std::string s = slurp(path);
  BOOST_REQUIRE(s.size() > 10);
  BOOST_TEST(s.substr(0, 6) == std::string("\x93NUMPY"));
  const size_t hlen = size_t(uint8_t(s[8])) | size_t(uint8_t(s[9])) << 8;
  BOOST_TEST((10 + hlen) % 64 == 0);
  const std::string header = s.substr(10, hlen);
  BOOST_TEST(header.find("'descr': '<f4'") != std::string::npos);
  BOOST_TEST(header.find("'shape': (2, 3)") != std::string::npos);
  BOOST_TEST(header.back() == '\n');
  BOOST_REQUIRE(s.size() == 10 + hlen + sizeof data);
  BOOST_TEST(std::memcmp(s.data() + 10 + hlen, data, sizeof data) == 0);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(npy_row_writer_equals_one_shot) {
  const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  write_npy_f32("test_common_b.npy", data, {4, 2});
  {
    NpyRowWriter w("test_common_c.npy", 4, 2);
    w.append(data, 1);
    w.append(data + 2, 3);
    w.close();
  }
  BOOST_TEST(slurp("test_common_b.npy") == slurp("test_common_c.npy"));
  NpyRowWriter short_file("test_common_d.npy", 4, 2);
  short_file.append(data, 1);
  BOOST_CHECK_EXCEPTION(short_file.close(), Error, says("test_common_d.npy: 1 rows written of 4"));
  for (const char* p : {"test_common_b.npy", "test_common_c.npy", "test_common_d.npy"}) std::remove(p);
}

BOOST_AUTO_TEST_CASE(one_dimensional_npy_shape_has_trailing_comma) {
  const float v[3] = {1, 2, 3};
  write_npy_f32("test_common_e.npy", v, {3});
  BOOST_TEST(slurp("test_common_e.npy").find("'shape': (3,)") != std::string::npos);
  std::remove("test_common_e.npy");
}

BOOST_AUTO_TEST_CASE(thread_pool_covers_every_index_once) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep)
        pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
      for (auto& h : hits) BOOST_TEST(h.load() == 3);
    }
  }
}

BOOST_AUTO_TEST_CASE(thread_pool_threads_take_a_stalled_threads_blocks) {
  // 2 threads, 8 blocks of 13: each thread's share is 4 blocks. The worker
  // stalls in its first block until the caller has run every other block,
  // which the caller can only do by taking the worker's share from its back
  // (a 120 s deadline: without stealing the test fails instead of hanging;
  // only a hang, never a slow machine, reaches it).
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> by_caller{0}, blocks{0};
  pool.parallel_for(100, 1, [&](int64_t, int64_t) {
    ++blocks;
    if (std::this_thread::get_id() == caller) {
      ++by_caller;
      return;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (by_caller.load() < 7 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  });
  BOOST_TEST(blocks.load() == 8);
  BOOST_TEST(by_caller.load() >= 7);
}

BOOST_AUTO_TEST_CASE(bf16_and_fp8_conversions_by_hand) {
  BOOST_TEST(bf16_to_f32(0x3f80) == 1.0f);
  BOOST_TEST(bf16_to_f32(0xc000) == -2.0f);
  BOOST_TEST(f32_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  BOOST_TEST(f32_to_bf16(1.00390625f) == 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even) -> up.
  BOOST_TEST(f32_to_bf16(1.01171875f) == 0x3f82);
  BOOST_TEST(fp8e4m3_to_f32(0x38) == 1.0f);       // exp 7, man 0
  BOOST_TEST(fp8e4m3_to_f32(0x7e) == 448.0f);     // max finite
  BOOST_TEST(fp8e4m3_to_f32(0x01) == 0.001953125f);  // smallest subnormal 2^-9
  BOOST_TEST(fp8e4m3_to_f32(0xb9) == -1.125f);
  BOOST_TEST(std::isnan(fp8e4m3_to_f32(0x7f)));
  BOOST_TEST(std::isnan(fp8e4m3_to_f32(0xff)));
}

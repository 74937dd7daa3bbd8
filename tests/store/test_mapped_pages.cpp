// Weights on 2 MiB pages (format/mapped_file.hpp, format/mapped_pages.hpp):
// the smaps reader on a recorded excerpt, summed by hand, and on this process;
// a file dropped from the page cache (what the converter does to its shards).
#define BOOST_TEST_MODULE mapped_pages
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "format/mapped_file.hpp"
#include "format/mapped_pages.hpp"
#include "platform/memory_advice.hpp"
#include "platform/page_stats.hpp"

using trillion::cached_bytes;
using trillion::drop_cached_pages;
using trillion::MappedFile;
using trillion::mostly_small_pages;
using trillion::platform::on_memory_filesystem;
using trillion::MappedPages;
using trillion::mapped_pages;
using trillion::parse_smaps;

namespace {

// Shaped after a Linux 6.18 /proc/PID/smaps of bench_model (fields trimmed):
// two shards, one with a path holding spaces, a library, an anonymous
// mapping, a "(deleted)" shard that no longer ends with .h5, and the heap.
const char* kSmaps =
    "7f8a61000000-7f8a64711000 r--s 00000000 fe:00 5316685                    /m/layer-005-experts-032-063.h5\n"
    "Size:              56388 kB\n"
    "Rss:               56384 kB\n"
    "FilePmdMapped:     53248 kB\n"
    "AnonHugePages:         0 kB\n"
    "VmFlags: rd sh mr mw me ms hg\n"
    "7f8a88c00000-7f8a8af32000 r--s 00000000 fe:00 5316686                    /my models/head.h5\n"
    "Rss:               36040 kB\n"
    "FilePmdMapped:     30720 kB\n"
    "7f8a94e00000-7f8a94e47000 r--p 00000000 fe:00 14885218                   /usr/lib/libhdf5.so.103\n"
    "Rss:                 284 kB\n"
    "FilePmdMapped:      2048 kB\n"
    "7f8a95000000-7f8a95200000 rw-p 00000000 00:00 0 \n"
    "Rss:                2048 kB\n"
    "FilePmdMapped:         0 kB\n"
    "AnonHugePages:      2048 kB\n"
    "7f8a96000000-7f8a96100000 r--s 00000000 fe:00 42                         /m/old.h5 (deleted)\n"
    "Rss:                1024 kB\n"
    "FilePmdMapped:         0 kB\n"
    "55d0c0000000-55d0c0400000 rw-p 00000000 00:00 0                          [heap]\n"
    "Rss:                4096 kB\n";

}  // namespace

BOOST_AUTO_TEST_CASE(sums_the_matching_mappings_of_a_recorded_smaps) {
  const MappedPages p = parse_smaps(kSmaps, ".h5");
  BOOST_TEST(p.mappings == 2);
  BOOST_TEST(p.resident_bytes == (56384 + 36040) * 1024LL);
  BOOST_TEST(p.huge_bytes == (53248 + 30720) * 1024LL);
  const MappedPages so = parse_smaps(kSmaps, ".so.103");
  BOOST_TEST(so.mappings == 1);
  BOOST_TEST(so.resident_bytes == 284 * 1024LL);
  BOOST_TEST(so.huge_bytes == 2048 * 1024LL);
}

BOOST_AUTO_TEST_CASE(the_loader_warns_only_of_enough_weights_mostly_on_small_pages) {
  constexpr int64_t MiB = int64_t(1) << 20;
  BOOST_TEST(mostly_small_pages(MappedPages{10, 1408 * MiB, 235 * MiB}));   // a freshly converted INT8 model
  BOOST_TEST(!mostly_small_pages(MappedPages{10, 1331 * MiB, 1281 * MiB}));  // the same, read in afresh
  BOOST_TEST(!mostly_small_pages(MappedPages{10, 512 * MiB, 256 * MiB}));    // half: not mostly small
  BOOST_TEST(mostly_small_pages(MappedPages{10, 512 * MiB, 256 * MiB - 1}));
  BOOST_TEST(!mostly_small_pages(MappedPages{10, 256 * MiB - 1, 0}));        // too little to matter
  BOOST_TEST(mostly_small_pages(MappedPages{10, 256 * MiB, 0}));
  BOOST_TEST(!mostly_small_pages(MappedPages{}));                            // nothing read in yet
}

BOOST_AUTO_TEST_CASE(nothing_matches_nothing) {
  const MappedPages p = parse_smaps(kSmaps, ".safetensors");
  BOOST_TEST(p.mappings == 0);
  BOOST_TEST(p.resident_bytes == 0);
  BOOST_TEST(p.huge_bytes == 0);
  BOOST_TEST(parse_smaps("", ".h5").mappings == 0);
  // A field line before any header, and a malformed size, count nothing.
  BOOST_TEST(parse_smaps("Rss: 12 kB\n7-8 r--s 0 0:0 1 /a.h5\nRss: x kB\n", ".h5").resident_bytes == 0);
}

BOOST_AUTO_TEST_CASE(a_mapped_file_advised_for_huge_pages_reads_the_same_and_is_counted) {
  // 4 MiB + 1 byte: two whole 2 MiB pages and a tail. What the kernel gives
  // (2 MiB pages or not) depends on its THP setting and the filesystem, so
  // only the bytes and the accounting are asserted, never the page size.
  const std::string suffix = ".mapped-pages-" + std::to_string(getpid()) + ".bin";
  const auto path = std::filesystem::temp_directory_path() / ("trillion-test" + suffix);
  std::vector<char> bytes((4 << 20) + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 131 + 17) & 255);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  {
    MappedFile f(path.string());
    f.advise_huge_pages();
    BOOST_TEST(f.size() == bytes.size());
    long sum_mapped = 0, sum_written = 0;
    const auto* d = reinterpret_cast<const unsigned char*>(f.data());
    for (size_t i = 0; i < bytes.size(); ++i) {
      sum_mapped += d[i] * long(i % 7 + 1);
      sum_written += static_cast<unsigned char>(bytes[i]) * long(i % 7 + 1);
    }
    BOOST_TEST(sum_mapped == sum_written);
    if (std::filesystem::exists("/proc/self/smaps")) {
      const MappedPages p = mapped_pages(suffix);
      BOOST_TEST(p.mappings == 1);
      BOOST_TEST(p.resident_bytes > 0);
      BOOST_TEST(p.huge_bytes <= p.resident_bytes);
    }
  }
  BOOST_TEST(mapped_pages(suffix).mappings == 0);  // unmapped with the MappedFile
  std::filesystem::remove(path);
}

// A file just written sits in the page cache; dropped, none of it does (on a
// filesystem with a disk copy to read back; tmpfs keeps every page). In the
// build tree, not /tmp, which may be a tmpfs.
BOOST_AUTO_TEST_CASE(a_dropped_file_leaves_the_page_cache_and_reads_the_same) {
  const auto path = std::filesystem::current_path() / ("trillion-test-drop-" + std::to_string(getpid()) + ".bin");
  std::vector<char> bytes((4 << 20) + 4097);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 37 + 5) & 255);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  const int64_t before = cached_bytes(path.string());
  drop_cached_pages(path.string());
  const int64_t after = cached_bytes(path.string());
  if (trillion::platform::can_drop_file_cache()) {  // Linux (macOS cannot drop a file's pages)
    BOOST_TEST(before >= int64_t(bytes.size()));  // written through the cache, whole pages
    if (on_memory_filesystem(path.string()))
      BOOST_TEST(after == before);
    else
      BOOST_TEST(after == 0);
  }
  {
    MappedFile f(path.string());  // read back from disk, unchanged
    BOOST_REQUIRE(f.size() == bytes.size());
    BOOST_TEST(std::memcmp(f.data(), bytes.data(), bytes.size()) == 0);
  }
  BOOST_TEST(cached_bytes(path.string()) >= int64_t(bytes.size()));
  std::filesystem::remove(path);
  BOOST_CHECK_THROW(drop_cached_pages(path.string()), trillion::SystemError);  // names a missing file
  BOOST_TEST(cached_bytes(path.string()) == -1);
}

// How a process's file mappings sit in memory: resident bytes and the part
// mapped with 2 MiB pages (MappedFile::advise_huge_pages says why that
// matters for decode). A diagnostic for benchmarks, read from Linux's
// /proc/self/smaps (platform/page_stats.hpp); elsewhere it reports nothing.
#pragma once
#include <cstdint>
#include <string>

namespace trillion {

struct MappedPages {
  int64_t mappings = 0;        // mappings whose file name ends with the suffix
  int64_t resident_bytes = 0;  // their Rss
  int64_t huge_bytes = 0;      // of which mapped as whole 2 MiB pages (FilePmdMapped)
};

// Sums the smaps entries (the text of /proc/PID/smaps) of files whose path
// ends with `suffix`. Entries without a path, or with other paths, are skipped.
MappedPages parse_smaps(const std::string& smaps, const std::string& suffix);

// parse_smaps of this process; all zeros where /proc/self/smaps is absent.
MappedPages mapped_pages(const std::string& suffix);

// Whether the weights a run has read in sit mostly on small pages: at least
// 256 MiB resident (smaller models run few TLB misses; a run that has not
// read its weights yet has nothing to judge), less than half of it on 2 MiB
// pages. The loader then warns (app/cluster.cpp): the page cache held the
// shards in small pages before the run mapped them.
bool mostly_small_pages(const MappedPages& p);

// Bytes of `path` the page cache holds (mincore over a mapping nothing
// touches, rounded to whole pages); -1 where it cannot tell (an unreadable
// file, mincore failing). Says whether drop_cached_pages took.
int64_t cached_bytes(const std::string& path);

}  // namespace trillion

// Machine profiles (docs/planning.md, "Profiles"): what `trillion plan` predicts from.
// A host: memory, cores, read bandwidth, and per kernel ("<format>/<path>")
// the FLOP/s one core reaches at several batch sizes with the weights in
// cache (the compute side of the roofline; memory is the bandwidth's side).
// A link: one-way latency and bandwidth of a hop through the RMA channel.
// `trillion calibrate` measures both on the machine it runs on; profiles/
// ships published figures for machines nobody here has, each labelled.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace trillion {

struct HostProfile {
  std::string name;
  int64_t memory_bytes = 0;
  int cores = 1;                        // cores the engine's threads use (performance cores)
  double bandwidth = 0;                 // bytes/s, all cores reading at once
  double bandwidth_per_core = 0;        // bytes/s, one core
  double vector_flops_per_core = 0;     // float32 dot/axpy (attention over the cache), FLOP/s
  double dispatch_seconds = 0;          // one parallel_for of the thread pool (per matrix call)
  // Where a machine's ranks x threads outnumber its cores, a waiting rank
  // sleeps once it has waited kWakeAfterSeconds (predict.hpp), and notices a
  // message wake_seconds late on average (the rest of the sleep under way,
  // and the timer's overshoot). 0: unknown (such a hop costs its link only).
  double wake_seconds = 0;
  std::map<std::string, std::map<int64_t, double>> kernels;  // "fp8/f32" -> batch -> FLOP/s per core
  // The same rates with the weights streaming from memory out of a file
  // mapping, as a model's shards are read (trillion calibrate): below the
  // in-cache rates where the kernel cannot hide the reads (few rows, formats
  // slow to unpack). Used for every weight matrix when present; profiles
  // without it (published figures) fall back to `kernels`.
  std::map<std::string, std::map<int64_t, double>> kernels_streaming;
  nlohmann::json sources;               // figure -> "measured ..." | "published: ..." | "estimated: ..."

  // FLOP/s per core of `kernel` at batch n: log-linear between measured
  // batches, the end value beyond them. Throws InputError naming the profile
  // when the kernel is absent.
  double kernel_rate(const std::string& kernel, double n) const;
  // FLOP/s per core of a weight matrix of `kernel` at batch n: from
  // kernels_streaming when it has the kernel, else kernel_rate.
  double weight_rate(const std::string& kernel, double n) const;
  // Bandwidth of `threads` threads of one rank when `busy_ranks` ranks of the host read at once.
  double rank_bandwidth(int threads, int busy_ranks) const;
};

struct LinkProfile {
  std::string name;
  double latency = 0;    // seconds, one notified put, one way
  double bandwidth = 0;  // bytes/s, one way
  nlohmann::json sources;
  double hop_seconds(double bytes) const { return latency + bytes / bandwidth; }
};

// Both throw InputError naming `source` and the field that is missing or wrong.
HostProfile host_profile_from_json(const nlohmann::json& j, const std::string& source);
LinkProfile link_profile_from_json(const nlohmann::json& j, const std::string& source);
// A profile file: {"host": ..., "link": ...} (either may be absent: nullopt-like
// flags say which were there).
struct ProfileFile {
  bool has_host = false, has_link = false;
  HostProfile host;
  LinkProfile link;
};
ProfileFile read_profile(const std::string& path);

nlohmann::json to_json(const HostProfile& h);
nlohmann::json to_json(const LinkProfile& l);

// Built in, used when no profile is given: a 2-core Zen 3 VM (measured by
// `trillion calibrate`, the figures of profiles/dev-zen3-2core.json)
// and shared memory between ranks of one host.
HostProfile default_host_profile();
LinkProfile default_link_profile();

}  // namespace trillion

#include "plan/profile.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "common/error.hpp"

namespace trillion {
namespace {

using json = nlohmann::json;

double positive(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
    throw InputError(where + ": \"" + key + "\" must be a positive number");
  return it->get<double>();
}

}  // namespace

namespace {
// Log-linear between measured batches, the end value beyond them.
double interpolate(const std::map<int64_t, double>& r, double n) {
  if (n <= double(r.begin()->first)) return r.begin()->second;
  if (n >= double(r.rbegin()->first)) return r.rbegin()->second;
  auto hi = r.lower_bound(int64_t(std::ceil(n)));
  auto lo = std::prev(hi);
  if (double(hi->first) == n) return hi->second;
  const double t = (std::log(n) - std::log(double(lo->first))) / (std::log(double(hi->first)) - std::log(double(lo->first)));
  return std::exp(std::log(lo->second) * (1 - t) + std::log(hi->second) * t);
}

// {"<format>/<path>": {"<batch>": FLOP/s}} into `out`.
void read_rates(const json& k, const std::string& where, const std::string& field,
                std::map<std::string, std::map<int64_t, double>>& out) {
  for (const auto& [key, rates] : k.items()) {
    if (!rates.is_object() || rates.empty()) throw InputError(where + ": " + field + "." + key + " must be an object");
    for (const auto& [batch, v] : rates.items()) {
      int64_t b = 0;
      try {
        size_t used = 0;
        b = std::stoll(batch, &used);
        if (used != batch.size()) b = 0;
      } catch (const std::exception&) {
        b = 0;
      }
      if (b < 1 || !v.is_number() || !(v.get<double>() > 0))
        throw InputError(where + ": " + field + "." + key + "." + batch + " must be a batch >= 1 with a positive FLOP/s");
      out[key][b] = v.get<double>();
    }
  }
}

json write_rates(const std::map<std::string, std::map<int64_t, double>>& in) {
  json k = json::object();
  for (const auto& [key, rates] : in)
    for (const auto& [b, v] : rates) k[key][std::to_string(b)] = v;
  return k;
}
}  // namespace

double HostProfile::kernel_rate(const std::string& kernel, double n) const {
  auto it = kernels.find(kernel);
  if (it == kernels.end() || it->second.empty())
    throw InputError("host profile \"" + name + "\" has no rate for kernel " + kernel +
                     " (trillion calibrate measures every kernel of this build)");
  return interpolate(it->second, n);
}

double HostProfile::weight_rate(const std::string& kernel, double n) const {
  auto it = kernels_streaming.find(kernel);
  if (it == kernels_streaming.end() || it->second.empty()) return kernel_rate(kernel, n);
  return interpolate(it->second, n);
}

double HostProfile::rank_bandwidth(int threads, int busy_ranks) const {
  const double own = bandwidth_per_core * double(std::max(1, threads));
  return std::min(own, bandwidth / double(std::max(1, busy_ranks)));
}

HostProfile host_profile_from_json(const json& j, const std::string& source) {
  const std::string where = source + ": host";
  if (!j.is_object()) throw InputError(where + " must be an object");
  HostProfile h;
  h.name = j.value("name", std::string("unnamed host"));
  h.memory_bytes = int64_t(positive(j, "memory_bytes", where));
  h.cores = int(positive(j, "cores", where));
  h.bandwidth = positive(j, "bandwidth_bytes_per_s", where);
  h.bandwidth_per_core = j.contains("bandwidth_per_core_bytes_per_s")
                             ? positive(j, "bandwidth_per_core_bytes_per_s", where)
                             : h.bandwidth / h.cores;
  h.vector_flops_per_core = positive(j, "vector_flops_per_core", where);
  h.dispatch_seconds = j.value("dispatch_seconds", 0.0);
  if (!(h.dispatch_seconds >= 0)) throw InputError(where + ": \"dispatch_seconds\" must be >= 0");
  h.wake_seconds = j.value("wake_seconds", 0.0);
  if (!(h.wake_seconds >= 0 && h.wake_seconds < 1)) throw InputError(where + ": \"wake_seconds\" must be in [0, 1)");
  auto k = j.find("kernels");
  if (k == j.end() || !k->is_object() || k->empty())
    throw InputError(where + ": \"kernels\" must map \"<format>/<path>\" to {\"<batch>\": FLOP/s per core}");
  read_rates(*k, where, "kernels", h.kernels);
  if (auto e = j.find("kernels_streaming"); e != j.end()) {
    if (!e->is_object()) throw InputError(where + ": \"kernels_streaming\" must be an object like \"kernels\"");
    read_rates(*e, where, "kernels_streaming", h.kernels_streaming);
  }
  h.sources = j.value("sources", json::object());
  return h;
}

LinkProfile link_profile_from_json(const json& j, const std::string& source) {
  const std::string where = source + ": link";
  if (!j.is_object()) throw InputError(where + " must be an object");
  LinkProfile l;
  l.name = j.value("name", std::string("unnamed link"));
  l.latency = positive(j, "latency_s", where);
  l.bandwidth = positive(j, "bandwidth_bytes_per_s", where);
  l.sources = j.value("sources", json::object());
  return l;
}

ProfileFile read_profile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError(path + ": cannot read the profile");
  json j;
  try {
    j = json::parse(f);
  } catch (const std::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw InputError(path + ": a profile is a JSON object with \"host\" and/or \"link\"");
  ProfileFile p;
  if (j.contains("host")) {
    p.host = host_profile_from_json(j["host"], path);
    p.has_host = true;
  }
  if (j.contains("link")) {
    p.link = link_profile_from_json(j["link"], path);
    p.has_link = true;
  }
  if (!p.has_host && !p.has_link) throw InputError(path + ": a profile needs \"host\" or \"link\"");
  return p;
}

json to_json(const HostProfile& h) {
  json out = {{"name", h.name},
          {"memory_bytes", h.memory_bytes},
          {"cores", h.cores},
          {"bandwidth_bytes_per_s", h.bandwidth},
          {"bandwidth_per_core_bytes_per_s", h.bandwidth_per_core},
          {"vector_flops_per_core", h.vector_flops_per_core},
          {"dispatch_seconds", h.dispatch_seconds},
          {"wake_seconds", h.wake_seconds},
          {"kernels", write_rates(h.kernels)},
          {"sources", h.sources}};
  if (!h.kernels_streaming.empty()) out["kernels_streaming"] = write_rates(h.kernels_streaming);
  return out;
}

json to_json(const LinkProfile& l) {
  return {{"name", l.name}, {"latency_s", l.latency}, {"bandwidth_bytes_per_s", l.bandwidth}, {"sources", l.sources}};
}

HostProfile default_host_profile() {
  // profiles/dev-zen3-2core.json, measured by `trillion calibrate` (docs/planning.md, "Profiles").
  static const char* kDefault = R"json({
    "name": "dev-zen3-2core (built-in default)", "memory_bytes": 25769803776, "cores": 2,
    "bandwidth_bytes_per_s": 28e9, "bandwidth_per_core_bytes_per_s": 18e9,
    "vector_flops_per_core": 20e9, "dispatch_seconds": 1e-6,
    "kernels": {"bf16/f32": {"1": 20e9, "32": 80e9}, "fp8/f32": {"1": 15e9, "32": 70e9},
                "int4/f32": {"1": 15e9, "32": 70e9}, "int8/f32": {"1": 20e9, "32": 70e9},
                "f32/f32": {"1": 20e9, "32": 80e9}, "int4/int8": {"1": 25e9, "32": 75e9},
                "int8/int8": {"1": 30e9, "32": 75e9}},
    "sources": {"all": "built-in default; run trillion calibrate for this machine's figures"}})json";
  return host_profile_from_json(json::parse(kDefault), "built-in default profile");
}

LinkProfile default_link_profile() {
  LinkProfile l;
  l.name = "shared memory, one host (built-in default)";
  l.latency = 2e-6;     // below a microsecond with free cores, ~2 us with spin-then-yield (docs/rma.md)
  l.bandwidth = 20e9;   // 1 MiB notified puts at 20-30 GB/s with 2 ranks
  l.sources = {{"all", "built-in default: RMA channel on one host, docs/rma.md figures"}};
  return l;
}

}  // namespace trillion

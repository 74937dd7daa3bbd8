#include "app/plan_inputs.hpp"

#include <cmath>
#include <filesystem>
#include <map>

#include "common/error.hpp"
#include "plan/config_manifest.hpp"
#include "plan/hostfile.hpp"
#include "store/model_store.hpp"

namespace fs = std::filesystem;

namespace trillion::app {

int64_t parse_bytes(const std::string& s, const std::string& flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = s.substr(used);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  const std::map<std::string, double> scale = {{"", 1}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0},
                                               {"T", 1099511627776.0}};
  auto it = scale.find(unit);
  if (used == 0 || it == scale.end() || !(v > 0) || !std::isfinite(v) || v * it->second > 9e18)
    throw InputError(flag + ": \"" + s + "\" is not a size (e.g. 192G, 512GiB, 1.5T)");
  return int64_t(v * it->second);
}

std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > 1'000'000)
      throw InputError(flag + ": \"" + item + "\" is not a positive integer (at most 1000000)");
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

PlanModel load_plan_model(const std::string& model_dir, const std::string& config, const std::string& quantize) {
  if (model_dir.empty() == config.empty()) throw InputError("give --model DIR or --config FILE (one of them)");
  PlanModel m;
  if (!model_dir.empty()) {
    if (!quantize.empty()) throw InputError("--quantize applies to --config (a converted model has its format)");
    auto store = ModelStore::open(model_dir, StoreOptions{false});
    m.source = model_dir;
    m.converted = true;
    m.config = store->config();
    m.manifest = store->manifest();
    return m;
  }
  std::string path = config;
  if (fs::is_directory(path)) path = (fs::path(path) / "config.json").string();
  if (!fs::is_regular_file(path)) throw InputError("--config: " + path + " is not a file");
  m.source = path;
  m.config = ModelConfig::from_file(path);
  if (!quantize.empty()) m.config = quantized_config(m.config, weight_format_from_string(quantize));
  m.manifest = manifest_from_config(m.config);
  return m;
}

PlanHosts plan_hosts(const std::string& hostfile, int ranks, int ranks_per_host, bool separate_hosts) {
  PlanHosts h;
  std::vector<std::string> names;
  if (!hostfile.empty()) {
    auto entries = read_hostfile(hostfile);
    if (ranks == 0)
      for (const auto& e : entries) ranks += e.slots;
    names = map_ranks(entries, ranks, hostfile);
  }
  if (ranks < 1) throw InputError("give --ranks N (N >= 1) or --hostfile");
  if (ranks > 4096) throw InputError("--ranks " + std::to_string(ranks) + ": at most 4096");
  if (names.empty()) {
    const int per = ranks_per_host > 0 ? ranks_per_host : separate_hosts ? 1 : ranks;
    for (int r = 0; r < ranks; ++r) names.push_back("host" + std::to_string(r / per));
  } else if (ranks_per_host > 0) {
    throw InputError("--ranks-per-host applies without --hostfile (the hostfile's slots say it)");
  }
  std::map<std::string, int> index;
  for (const auto& n : names) {
    auto [it, fresh] = index.try_emplace(n, int(h.host_names.size()));
    if (fresh) h.host_names.push_back(n);
    h.host_of_rank.push_back(it->second);
  }
  return h;
}

}  // namespace trillion::app

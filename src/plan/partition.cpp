#include "plan/partition.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace trillion {

std::vector<LayerRange> balance_pipeline(const std::vector<int64_t>& layer_bytes, int64_t embed_bytes,
                                         int64_t head_bytes, int ranks) {
  const int64_t L = int64_t(layer_bytes.size());
  if (ranks < 1) throw InputError("the rank count must be at least 1");
  if (ranks > L)
    throw InputError("pipeline mode needs at most one rank per layer: " + std::to_string(ranks) +
                     " ranks for " + std::to_string(L) + " layers");
  std::vector<int64_t> prefix(size_t(L + 1), 0);
  for (int64_t i = 0; i < L; ++i) prefix[size_t(i + 1)] = prefix[size_t(i)] + layer_bytes[size_t(i)];
  auto cost = [&](int64_t b, int64_t e, int stage) {
    int64_t c = prefix[size_t(e)] - prefix[size_t(b)];
    if (stage == 0) c += embed_bytes;
    if (stage == ranks - 1) c += head_bytes;
    return c;
  };
  // best[s][e]: minimal max-stage cost placing layers [0, e) on stages 0..s.
  const int64_t INF = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(size_t(ranks), std::vector<int64_t>(size_t(L + 1), INF));
  std::vector<std::vector<int64_t>> cut(size_t(ranks), std::vector<int64_t>(size_t(L + 1), 0));
  for (int64_t e = 1; e <= L; ++e) best[0][size_t(e)] = cost(0, e, 0);
  for (int s = 1; s < ranks; ++s) {
    for (int64_t e = s + 1; e <= L; ++e) {
      for (int64_t b = s; b < e; ++b) {  // stage s holds [b, e); earlier stages >= 1 layer each
        if (best[size_t(s - 1)][size_t(b)] == INF) continue;
        const int64_t c = std::max(best[size_t(s - 1)][size_t(b)], cost(b, e, s));
        // Ties: prefer the later cut (earlier stages fuller), a fixed rule.
        if (c <= best[size_t(s)][size_t(e)]) {
          best[size_t(s)][size_t(e)] = c;
          cut[size_t(s)][size_t(e)] = b;
        }
      }
    }
  }
  std::vector<LayerRange> out(static_cast<size_t>(ranks));
  int64_t e = L;
  for (int s = ranks - 1; s >= 0; --s) {
    const int64_t b = s == 0 ? 0 : cut[size_t(s)][size_t(e)];
    out[size_t(s)] = LayerRange{b, e, s == 0, s == ranks - 1};
    e = b;
  }
  return out;
}

std::vector<LayerRange> parse_stages(const std::string& spec, int64_t num_layers, int ranks) {
  std::vector<LayerRange> out;
  size_t at = 0;
  int64_t expect = 0;
  auto bad = [&](const std::string& why) {
    throw InputError("--stages \"" + spec + "\": " + why);
  };
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    std::string part = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t dash = part.find('-');
    int64_t b = 0, e = 0;
    try {
      size_t used = 0;
      b = std::stoll(part.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? part.size() : dash)) bad("\"" + part + "\" is not a range");
      e = dash == std::string::npos ? b : std::stoll(part.substr(dash + 1), &used);
      if (dash != std::string::npos && used != part.size() - dash - 1) bad("\"" + part + "\" is not a range");
    } catch (const std::logic_error&) {
      bad("\"" + part + "\" is not a range like 0-14");
    }
    if (b != expect) bad("stage " + std::to_string(out.size()) + " starts at layer " + std::to_string(b) +
                         ", expected " + std::to_string(expect) + " (ranges must be contiguous from 0)");
    if (e < b) bad("\"" + part + "\" is empty");
    if (e >= num_layers) bad("layer " + std::to_string(e) + " does not exist (the model has " +
                             std::to_string(num_layers) + ")");
    out.push_back(LayerRange{b, e + 1, out.empty(), false});
    expect = e + 1;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (expect != num_layers) bad("layers " + std::to_string(expect) + ".." + std::to_string(num_layers - 1) +
                                " are not assigned");
  if (int(out.size()) != ranks)
    bad(std::to_string(out.size()) + " stages for " + std::to_string(ranks) + " ranks");
  out.back().has_head = true;
  return out;
}

int64_t parse_head_split(const std::string& spec) {
  if (spec.empty() || spec == "auto") return -1;
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(spec, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used != spec.size() || v < 0)
    throw InputError("--head-split \"" + spec + "\": expected a row count >= 0 or auto");
  return v;
}

ExpertRange experts_of_rank(int64_t n_experts, int ranks, int rank) {
  return ExpertRange{n_experts * rank / ranks, n_experts * (rank + 1) / ranks};
}

int owner_of_expert(int64_t n_experts, int ranks, int64_t expert) {
  // The largest r with floor(r*E/N) <= e.
  int r = int((expert * ranks + ranks - 1) / n_experts);
  while (r > 0 && n_experts * r / ranks > expert) --r;
  while (r + 1 < ranks && n_experts * (r + 1) / ranks <= expert) ++r;
  return r;
}

}  // namespace trillion

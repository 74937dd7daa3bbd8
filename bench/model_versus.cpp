#include "model_versus.hpp"

#include <array>
#include <cstdio>

#include "bench_stats.hpp"

namespace trillion::bench {

namespace {

// One model's sequences at one batch: its cache, and the tokens it feeds next.
struct Lane {
  Lane(LoadedModel& m, int batch, int context, int steps)
      : model(m), cache(m.config(), whole_model(m.config()), batch, context + steps + 1) {
    const Prompts pre = prompts(batch, context, m.config().vocab_size);
    model.bench->step(pre.batch, pre.tokens, cache, pre.heads, &next);
  }
  StepStats step(int batch, int pos) {
    Batch b;
    std::vector<int64_t> all(static_cast<size_t>(batch));
    for (int s = 0; s < batch; ++s) b.rows.push_back({s, pos}), all[size_t(s)] = s;
    const std::vector<int32_t> in = next;
    return model.bench->step(b, in, cache, all, &next);
  }
  LoadedModel& model;
  KvCache cache;
  std::vector<int32_t> next;
};

}  // namespace

nlohmann::json decode_versus(LoadedModel& a, LoadedModel& b, const std::vector<int>& batches, int context,
                             int steps, bool phases) {
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-12s %12s %12s %10s %18s %10s %10s\n", "step", "A tokens/s", "B tokens/s", "A over B", "(quartiles)",
              "A MB/step", "B MB/step");
  for (const int B : batches) {
    Lane la(a, B, context, steps), lb(b, B, context, steps);
    std::vector<double> ra, rb, ratio;
    double bytes_a = 0, bytes_b = 0;  // weights streamed (routing differs between models)
    std::array<double, size_t(Phase::count)> phase_a{}, phase_b{};  // mean seconds (when timed by phase)
    for (int t = 0; t < steps; ++t) {
      StepStats sa, sb;
      if (t % 2 == 0) sa = la.step(B, context + t), sb = lb.step(B, context + t);
      else sb = lb.step(B, context + t), sa = la.step(B, context + t);
      ra.push_back(B / sa.seconds), rb.push_back(B / sb.seconds), ratio.push_back(sb.seconds / sa.seconds);
      bytes_a += double(sa.weight_bytes) / steps, bytes_b += double(sb.weight_bytes) / steps;
      for (size_t i = 0; i < phase_a.size(); ++i)
        phase_a[i] += sa.phase_seconds[i] / steps, phase_b[i] += sb.phase_seconds[i] / steps;
    }
    nlohmann::json j{{"batch", B},
                     {"pairs", steps},
                     {"a_tokens_per_s", quantile(ra, 0.5)},
                     {"b_tokens_per_s", quantile(rb, 0.5)},
                     {"a_over_b_median", quantile(ratio, 0.5)},
                     {"a_over_b_q1", quantile(ratio, 0.25)},
                     {"a_over_b_q3", quantile(ratio, 0.75)},
                     {"a_mb_per_step", bytes_a / 1e6},
                     {"b_mb_per_step", bytes_b / 1e6}};
    std::printf("%-12s %12.1f %12.1f %9.3fx %8.3f-%.3f %10.1f %10.1f\n", ("decode b=" + std::to_string(B)).c_str(),
                j["a_tokens_per_s"].get<double>(), j["b_tokens_per_s"].get<double>(),
                j["a_over_b_median"].get<double>(), j["a_over_b_q1"].get<double>(), j["a_over_b_q3"].get<double>(),
                bytes_a / 1e6, bytes_b / 1e6);
    if (phases) {
      std::printf("  ms a step by phase, A / B:");
      for (size_t i = 0; i < phase_a.size(); ++i) {
        std::printf(" %s %.3f / %.3f%s", phase_name(Phase(i)), 1e3 * phase_a[i], 1e3 * phase_b[i],
                    i + 1 < phase_a.size() ? "," : "\n");
        j["a_phases_ms"][phase_name(Phase(i))] = 1e3 * phase_a[i];
        j["b_phases_ms"][phase_name(Phase(i))] = 1e3 * phase_b[i];
      }
    }
    std::fflush(stdout);
    out.push_back(j);
  }
  return out;
}

}  // namespace trillion::bench

// Where a forward step's wall time goes, by phase, for benchmarks and
// tuning (bench_model --phases): the weight products of attention, the
// absorbed per-head products, the attention over the cache, the router, the
// experts, the dense MLPs and the head. Off unless a Transformer is given
// one (Transformer::time_phases): a step then pays one clock read at each
// end of each timed phase. Timed on the thread that runs the layers; a
// phase's pool calls are inside it. What no phase covers (norms, rope,
// cache writes, residuals, quantizing activations outside products) is the
// step's time less their sum.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>

namespace trillion {

enum class Phase : int {
  attn_proj,   // q_a / kv_a (or q / kv_a), q_b, o_proj
  absorbed,    // W_UK^T q_nope and W_UV ctx per head (kv_b)
  attend,      // softmax(q . cache) . cache (mla_attend)
  router,      // gate scores, sigmoid, top-k
  experts,     // the expert backend (routed experts, and the shared one where it runs it), and the shared expert
  dense_mlp,   // the dense layers' MLPs
  head,        // final norm + lm_head
  count
};

inline const char* phase_name(Phase p) {
  static constexpr const char* kNames[] = {"attention projections", "W_UK/W_UV", "attend", "router",
                                           "experts", "dense mlp", "head"};
  return kNames[int(p)];
}

class PhaseTimes {
 public:
  using Clock = std::chrono::steady_clock;
  void add(Phase p, Clock::duration d) {
    ns_[size_t(p)] += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    ++entered_[size_t(p)];
  }
  double seconds(Phase p) const { return double(ns_[size_t(p)]) * 1e-9; }
  // How many times the phase was timed (what tests check: a count, not a clock).
  int64_t entered(Phase p) const { return entered_[size_t(p)]; }
  void reset() {
    ns_.fill(0);
    entered_.fill(0);
  }

 private:
  std::array<int64_t, size_t(Phase::count)> ns_{};
  std::array<int64_t, size_t(Phase::count)> entered_{};
};

// Adds the wall time from construction to destruction to `times` (nothing when null).
class PhaseScope {
 public:
  PhaseScope(PhaseTimes* times, Phase p) : times_(times), phase_(p) {
    if (times_) t0_ = PhaseTimes::Clock::now();
  }
  ~PhaseScope() {
    if (times_) times_->add(phase_, PhaseTimes::Clock::now() - t0_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimes* times_;
  Phase phase_;
  PhaseTimes::Clock::time_point t0_{};
};

}  // namespace trillion

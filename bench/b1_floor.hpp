// The batch-1 kernel floor bench_model --floor compares a decode step with:
// every matrix a one-token step streams, each timed as one pool product. The
// step's time over this sum is what the model adds to (or saves on) its
// kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "kernels/qmatrix.hpp"
#include "model/linear.hpp"
#include "model/mlp.hpp"
#include "model/weights.hpp"

namespace trillion::bench {

// Every matrix a one-token step streams, in model order: top_k experts per
// MoE layer stand in for the chosen ones (pass p takes experts p*top_k ..
// p*top_k + top_k - 1 mod the layer's count, so that, as routing does, the
// passes together read every expert's pages rather than the same few, which
// stay in the TLB); kv_b as the absorbed attention runs it (per head W_UK^T
// and W_UV, on the exact float path).
struct Floor {
  struct Mat {
    std::string part;
    QMatrix m;
    bool exact = false;  // always the float path
    int64_t layer = -1;  // a routed expert's matrix: which of the layer's experts is the pass's choice
    int64_t slot = -1;   // 0..top_k-1
    int which = 0;       // gate, up, down
    int absorbed = 0;    // kv_b's per-head W_UK^T q_nope (1) or W_UV ctx (2), as attention.cpp runs them
  };
  std::vector<Mat> mats;                         // in model order
  std::vector<std::vector<MlpWeights>> experts;  // [layer][expert]
  int64_t top_k = 0;
  int64_t heads = 0, nope = 0, v = 0, r = 0;  // the absorbed attention's shapes
};

Floor b1_floor_matrices(const ModelConfig& cfg, TensorSource& src);

// Times passes over a Floor, one at a time, so they can interleave with the
// decode steps they are compared with (same machine load for both).
class FloorTimer {
 public:
  FloorTimer(Floor f, ThreadPool& pool, Activations act);
  // Each matrix as one pool product at n=1 on the compute path the model
  // uses for it (linear(); kv_b's two per-head products as attention.cpp).
  void pass();
  nlohmann::json json() const;  // medians over the passes

 private:
  const QMatrix& matrix(const Floor::Mat& fm) const;
  void absorbed(const QMatrix& kv_b, int which);
  double absorbed_share(int which) const;
  size_t part_of(const Floor::Mat& fm) const;

  Floor f_;
  ThreadPool& pool_;
  Activations act_;
  std::vector<std::string> parts_;
  std::vector<float> x_, y_;
  std::vector<std::vector<double>> by_part_;
  std::vector<double> bytes_;  // per part, of the last pass
  std::vector<double> totals_;  // per pass (their count picks a pass's experts)
};

}  // namespace trillion::bench

// The byte layout of the runtime's messages between ranks: steps (token rows
// and, between pipeline stages, their activations) and step results (greedy
// tokens, optional logits). Plain little-endian records; decoding checks
// every size so a protocol bug is an error, never garbage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "parallel/step_runner.hpp"

namespace trillion {

// Message tags on the channel (checked by receivers).
enum WireTag : int32_t {
  kTagStep = 1,      // StepInput (+ activations between pipeline stages)
  kTagResult = 2,    // StepOutput
  kTagStop = 3,      // end of the run
  kTagDispatch = 4,  // expert parallel: tokens to the experts' owners
  kTagCombine = 5,   // expert parallel: expert outputs back to the tokens' owners
  kTagMetrics = 6,   // end of the run: each rank's RankMetrics (JSON) to rank 0
  kTagHeadPart = 7,  // split head: the last stage's normed rows and its logit columns, to rank 0
};

struct WireStep {
  uint64_t ticket = 0;
  StepInput input;
  std::vector<float> x;  // [n, hidden] activations; empty when the receiver embeds the tokens
};

std::vector<std::byte> encode_step(uint64_t ticket, const StepInput& in, const float* x, int64_t hidden);
WireStep decode_step(std::span<const std::byte> bytes, int64_t hidden);

std::vector<std::byte> encode_result(const StepOutput& out);
StepOutput decode_result(std::span<const std::byte> bytes, int64_t vocab);

// A split head's hand-back (LayerRange::head_split): the final-normed logit
// rows h [m, hidden] and the last stage's logit columns [m, cols] (lm_head
// rows [split, vocab)); rank 0 computes the columns before them and chooses.
struct HeadPart {
  uint64_t ticket = 0;
  int64_t m = 0, cols = 0;
  std::vector<float> h, logits;
};
std::vector<std::byte> encode_head_part(const HeadPart& p, int64_t hidden);
HeadPart decode_head_part(std::span<const std::byte> bytes, int64_t hidden, int64_t cols);

}  // namespace trillion

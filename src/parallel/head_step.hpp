// The head of a step, run where the final norm and lm_head live (the one
// rank, the last pipeline stage, every expert-parallel rank for its own
// rows): logits of the requested rows and the token each row's
// SamplingParams choose. Every runner calls this one function, so every
// layout produces the same bits.
#pragma once
#include <vector>

#include "model/transformer.hpp"
#include "parallel/speculator.hpp"
#include "parallel/step_runner.hpp"

namespace trillion {

// x: [in.batch.size(), hidden] activations after the last layer. With a
// Speculator (--speculative mtp) the tokens are chosen by it: drafts
// verified, and the MTP layer's next drafts in StepOutput::drafts.
StepOutput head_step(const Transformer& model, const float* x, const StepInput& in, Speculator* spec = nullptr);

// The rows of x [n, hidden] that in.logit_rows names, in that order: what
// goes through the (vocabulary-sized) head.
std::vector<float> logit_rows_of(const float* x, const StepInput& in, int64_t hidden);

// The choice half of head_step, from out.logits [in.logit_rows.size(), vocab]:
// fills out.tokens, logprobs and top_logprobs, and drops the logits unless
// in.return_logits. A split head (LayerRange::head_split) assembles the
// logits on the first stage and chooses there.
void choose_tokens(const ModelConfig& cfg, const StepInput& in, StepOutput& out);

}  // namespace trillion

#include "parallel/head_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "sampling/sampler.hpp"

namespace trillion {

std::vector<float> logit_rows_of(const float* x, const StepInput& in, int64_t hidden) {
  const int64_t m = int64_t(in.logit_rows.size());
  std::vector<float> rows(size_t(m * hidden));
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(&rows[size_t(i * hidden)], x + in.logit_rows[size_t(i)] * hidden, size_t(hidden) * sizeof(float));
  return rows;
}

StepOutput head_step(const Transformer& model, const float* x, const StepInput& in, Speculator* spec) {
  const int64_t d = model.config().hidden_size, vocab = model.config().vocab_size;
  const int64_t m = int64_t(in.logit_rows.size());
  if (model.head_rows() != vocab) throw Error("head_step: this rank holds only part of a split head");
  // Only the requested rows go through the (vocabulary-sized) head.
  const std::vector<float> rows = logit_rows_of(x, in, d);
  StepOutput out;
  out.logits.resize(size_t(m * vocab));
  model.logits(rows.data(), m, out.logits.data());
  if (spec) {
    spec->choose_and_draft(model, x, in, out);
    if (!in.return_logits) out.logits = {};
    return out;
  }
  if (!in.drafts.empty() || !in.mtp_next.empty())
    throw Error("head_step: a speculative step on a rank without the MTP layer (run with --speculative mtp)");
  choose_tokens(model.config(), in, out);
  return out;
}

void choose_tokens(const ModelConfig& cfg, const StepInput& in, StepOutput& out) {
  const int64_t vocab = cfg.vocab_size, m = int64_t(in.logit_rows.size());
  if (out.logits.size() != size_t(m * vocab)) throw Error("choose_tokens: logits of the wrong size");
  out.tokens.resize(size_t(m));
  out.logprobs.assign(size_t(m), 0.0f);
  out.top_logprobs.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i) {
    const SamplingParams p = in.sampling.empty() ? SamplingParams{} : in.sampling.at(size_t(i));
    const float* row = &out.logits[size_t(i * vocab)];
    // A NaN or infinity would make any choice garbage: the row's token is -1
    // and its request fails with an error (rows are independent: one
    // request's overflow is its own), rather than writing a random token.
    if (!std::all_of(row, row + vocab, [](float v) { return std::isfinite(v); })) {
      out.tokens[size_t(i)] = -1;
      continue;
    }
    // Before a request's min_tokens the EOS ids are masked out of the choice.
    Sample s = p.mask_eos ? sample_token(row, vocab, p, cfg.eos_token_ids) : sample_token(row, vocab, p);
    out.tokens[size_t(i)] = s.token;
    out.logprobs[size_t(i)] = s.logprob;
    out.top_logprobs[size_t(i)] = std::move(s.top);
  }
  if (!in.return_logits) {
    out.logits.clear();
    out.logits.shrink_to_fit();
  }
}

}  // namespace trillion

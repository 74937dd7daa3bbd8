#include "parallel/speculator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "sampling/speculative.hpp"

namespace trillion {

Speculator::Speculator(const ModelConfig& cfg, TensorSource& source, ThreadPool& pool, const RunShape& shape,
                       int32_t slots)
    : cfg_(cfg),
      mtp_(cfg, source, pool, shape.activations),
      cache_(cfg, mtp_.cache_range(), slots, shape.max_len, shape.kv_tokens),
      q_(size_t(slots)) {}

void Speculator::choose_and_draft(const Transformer& model, const float* x, const StepInput& in, StepOutput& out) {
  const int64_t d = cfg_.hidden_size, vocab = cfg_.vocab_size, n = in.batch.size();
  const int64_t m = int64_t(in.logit_rows.size());
  const bool drafts_in = !in.drafts.empty(), mtp = !in.mtp_next.empty();
  if ((drafts_in && int64_t(in.drafts.size()) != m) || (mtp && int64_t(in.mtp_next.size()) != n))
    throw Error("Speculator: drafts or MTP tokens do not match the step's rows");
  auto params = [&](int64_t i) { return in.sampling.empty() ? SamplingParams{} : in.sampling.at(size_t(i)); };
  auto slot_of = [&](int64_t i) { return in.batch.rows[size_t(in.logit_rows[size_t(i)])].slot; };

  // 1. Tokens, in row order: a draft's row counts only when its draft was accepted.
  out.tokens.assign(size_t(m), 0);
  out.logprobs.assign(size_t(m), 0.0f);
  out.top_logprobs.assign(size_t(m), {});
  std::vector<char> chain_end(size_t(m), 0);  // the last row its sequence produced in this step
  bool dead = false;                          // this row is a rejected draft's
  for (int64_t i = 0; i < m; ++i) {
    if (dead) {
      out.tokens[size_t(i)] = kNotProduced;
      dead = drafts_in && in.drafts[size_t(i)] >= 0;  // (a chain is two rows; longer ones stay consistent)
      continue;
    }
    const SamplingParams p = params(i);
    const float* row = &out.logits[size_t(i * vocab)];
    const int32_t draft = drafts_in ? in.drafts[size_t(i)] : -1;
    if (!std::all_of(row, row + vocab, [](float v) { return std::isfinite(v); })) {
      out.tokens[size_t(i)] = -1;  // the request fails (head_step's rule); nothing after it counts
      dead = draft >= 0;
      continue;
    }
    Sample s;
    if (p.mask_eos) {
      // Before min_tokens the target is the EOS-masked distribution (head_step's
      // rule): its token is drawn directly, as without a draft, and a draft is
      // dropped (always rejecting keeps the output distribution exact).
      s = sample_token(row, vocab, p, cfg_.eos_token_ids);
      dead = draft >= 0;
      chain_end[size_t(i)] = 1;
    } else if (draft >= 0) {
      const int32_t slot = slot_of(i);
      if (slot < 0 || slot >= int32_t(q_.size())) throw Error("Speculator: slot out of range");
      const Verdict v = verify_draft(row, vocab, p, draft, q_[size_t(slot)]);
      s.token = v.token;
      add_logprobs(row, vocab, p, s);
      dead = !v.accepted;
      chain_end[size_t(i)] = dead;
    } else {
      s = sample_token(row, vocab, p);
      chain_end[size_t(i)] = 1;
    }
    out.tokens[size_t(i)] = s.token;
    out.logprobs[size_t(i)] = s.logprob;
    out.top_logprobs[size_t(i)] = std::move(s.top);
  }
  out.drafts.assign(size_t(m), -1);
  if (!mtp) return;

  // 2. The MTP layer over the rows that stand, each with the token after it.
  std::vector<int64_t> logit_of(size_t(n), -1);
  for (int64_t i = 0; i < m; ++i) logit_of[size_t(in.logit_rows[size_t(i)])] = i;
  Batch rows;
  rows.released = in.batch.released;
  rows.prefix_ops = in.batch.prefix_ops;
  std::vector<int32_t> next;
  std::vector<int64_t> src;  // batch row of each MTP row
  for (int64_t r = 0; r < n; ++r) {
    int32_t t = in.mtp_next[size_t(r)];
    const int64_t li = logit_of[size_t(r)];
    if (li >= 0) t = out.tokens[size_t(li)];  // kNotProduced or -1 (failed): the row does not stand
    if (t < 0) continue;
    rows.rows.push_back(in.batch.rows[size_t(r)]);
    next.push_back(t);
    src.push_back(r);
  }
  const int64_t k = rows.size();
  std::vector<float> h(size_t(k * d)), xs(size_t(k * d));
  for (int64_t j = 0; j < k; ++j) std::memcpy(&xs[size_t(j * d)], x + src[size_t(j)] * d, size_t(d) * sizeof(float));
  model.final_norm(xs.data(), k, h.data());
  std::vector<float> mo(size_t(k * d));
  mtp_.forward(rows, h.data(), next.data(), cache_, mo.data());

  // 3. Drafts from each sequence's last produced row, with the main lm_head.
  std::vector<int64_t> ends, end_logit;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t li = logit_of[size_t(src[size_t(j)])];
    if (li >= 0 && chain_end[size_t(li)]) {
      ends.push_back(j);
      end_logit.push_back(li);
    }
  }
  const int64_t e = int64_t(ends.size());
  if (e == 0) return;
  std::vector<float> eh(size_t(e * d)), logits(size_t(e * vocab));
  for (int64_t j = 0; j < e; ++j)
    std::memcpy(&eh[size_t(j * d)], &mo[size_t(ends[size_t(j)] * d)], size_t(d) * sizeof(float));
  model.head(eh.data(), e, logits.data());
  mtp_.dump_logits(logits.data(), e);
  for (int64_t j = 0; j < e; ++j) {
    const int64_t li = end_logit[size_t(j)];
    const float* row = &logits[size_t(j * vocab)];
    if (!std::all_of(row, row + vocab, [](float v) { return std::isfinite(v); })) continue;  // no draft
    SamplingParams p = params(li);
    ++p.position;  // the token after the one this row chose
    const int32_t slot = slot_of(li);
    out.drafts[size_t(li)] = draft_token(row, vocab, p, &q_[size_t(slot)]);
  }
}

}  // namespace trillion

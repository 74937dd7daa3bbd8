// Speculative decoding's token choices (Leviathan et al. 2023, Chen et al.
// 2023: "standard speculative sampling"), as pure functions of logits,
// parameters and the request's Philox stream, so they stay independent of
// batch and layout like sample_token.
//
// A draft model (here the MTP layer) proposes d for position P; the target
// model's logits at P then verify it:
//   greedy (temperature 0): accept iff d == argmax(target); the token is the
//     target's argmax either way, so the output is plain greedy decoding's.
//   sampled: q is the draft's distribution and p the target's, each after
//     temperature, top-k, top-p and min-p (sampling_candidates); accept d with
//     probability min(1, p(d)/q(d)), else draw from norm(max(0, p - q)). The
//     token then has exactly p's distribution.
// Uniform numbers: philox_uniform(seed, P, stream) with a stream per purpose,
// never stream 0 (plain sampling's draw at P), so the three are independent.
#pragma once
#include <cstdint>

#include "sampling/sampler.hpp"

namespace trillion {

enum SpecStream : uint32_t { kDraftStream = 1, kAcceptStream = 2, kResidualStream = 3 };

// The draft for position p.position from the draft model's logits: greedy,
// its argmax; sampled, a draw from its candidates q (returned in *q, which
// verification needs) with the draft stream.
int32_t draft_token(const float* draft_logits, int64_t vocab, const SamplingParams& p, Candidates* q);

struct Verdict {
  int32_t token = 0;     // the token at position p.position
  bool accepted = false;  // token == draft, so the draft's own row (position + 1) is valid
};

// Verifies `draft` against the target's logits at p.position; q is what
// draft_token returned (unused when greedy).
Verdict verify_draft(const float* target_logits, int64_t vocab, const SamplingParams& p, int32_t draft,
                     const Candidates& q);

// The pure math of the sampled case, on distributions (tokens and probs, any order):
// accept with min(1, p(d)/q(d)) using u_accept, else the residual draw with u_residual.
Verdict speculative_choice(const Candidates& p, const Candidates& q, int32_t draft, double u_accept,
                           double u_residual);

}  // namespace trillion

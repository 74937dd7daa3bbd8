#include "parallel/rma_experts.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "parallel/exchange.hpp"
#include "parallel/wire.hpp"
#include "plan/partition.hpp"

namespace trillion {
namespace {

// Dispatch message to one owner: [i32 tokens][i32 pairs][i32 pair_token[pairs]]
// [i32 pair_expert[pairs]][f32 x[tokens, hidden]]. Pairs are in (token, k)
// order; the combine message returns f32 out[pairs, hidden] in that order.
struct Dispatch {
  std::vector<int32_t> pair_token;   // index into this message's tokens
  std::vector<int32_t> pair_expert;
  std::vector<int64_t> pair_slot;    // sender side: i * top_k + k of the pair
  std::vector<int64_t> tokens;       // sender side: request token index of each token
};

template <class T>
void append(std::vector<std::byte>& b, const T* p, size_t n) {
  const size_t at = b.size();
  b.resize(at + n * sizeof(T));
  if (n) std::memcpy(b.data() + at, p, n * sizeof(T));
}

template <class T>
const std::byte* take(const std::byte* p, const std::byte* end, T* out, size_t n, int src) {
  if (size_t(end - p) < n * sizeof(T))
    throw Error("protocol error: short expert dispatch message from rank " + std::to_string(src));
  if (n) std::memcpy(out, p, n * sizeof(T));
  return p + n * sizeof(T);
}

}  // namespace

RmaExperts::RmaExperts(RmaChannel& channel, LocalExperts& local, int64_t n_experts)
    : ch_(channel), local_(local), n_experts_(n_experts) {}

void RmaExperts::run(const ExpertRequest& req) {
  using clock = std::chrono::steady_clock;
  const int ranks = ch_.size();
  const int64_t d = req.hidden, K = req.top_k;

  // 1. Group this rank's (token, k) pairs by owner rank.
  std::vector<Dispatch> to(static_cast<size_t>(ranks));
  for (int64_t i = 0; i < req.n; ++i) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = req.ids[i * K + k];
      if (e < 0 || e >= n_experts_) throw Error("expert id " + std::to_string(e) + " out of range");
      Dispatch& m = to[size_t(owner_of_expert(n_experts_, ranks, e))];
      if (m.tokens.empty() || m.tokens.back() != i) m.tokens.push_back(i);
      m.pair_token.push_back(int32_t(m.tokens.size() - 1));
      m.pair_expert.push_back(e);
      m.pair_slot.push_back(i * K + k);
    }
  }
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const Dispatch& m = to[size_t(r)];
    const int32_t hdr[2] = {int32_t(m.tokens.size()), int32_t(m.pair_token.size())};
    auto& b = out[size_t(r)];
    b.reserve(8 + m.pair_token.size() * 8 + m.tokens.size() * size_t(d) * 4);
    append(b, hdr, 2);
    append(b, m.pair_token.data(), m.pair_token.size());
    append(b, m.pair_expert.data(), m.pair_expert.size());
    for (int64_t t : m.tokens) append(b, req.x + t * d, size_t(d));
  }
  auto t0 = clock::now();
  auto in = all_to_all(ch_, kTagDispatch, std::move(out));
  auto t1 = clock::now();

  // 2. Run every received pair on the experts held here, all sources at once:
  // pairs become rows of a top-1 request, grouped by expert inside LocalExperts.
  std::vector<int64_t> first_pair(static_cast<size_t>(ranks) + 1, 0);
  std::vector<float> xs;
  std::vector<int32_t> ids;
  for (int s = 0; s < ranks; ++s) {
    const auto& b = in[size_t(s)];
    const std::byte* p = b.data();
    const std::byte* end = b.data() + b.size();
    int32_t hdr[2];
    p = take(p, end, hdr, 2, s);
    const int32_t tokens = hdr[0], pairs = hdr[1];
    if (tokens < 0 || pairs < 0) throw Error("protocol error: bad expert dispatch header from rank " + std::to_string(s));
    std::vector<int32_t> pt(static_cast<size_t>(pairs)), pe(static_cast<size_t>(pairs));
    p = take(p, end, pt.data(), size_t(pairs), s);
    p = take(p, end, pe.data(), size_t(pairs), s);
    if (size_t(end - p) != size_t(tokens) * size_t(d) * 4)
      throw Error("protocol error: expert dispatch from rank " + std::to_string(s) + " has the wrong size");
    const float* x = reinterpret_cast<const float*>(p);
    const size_t at = xs.size();
    xs.resize(at + size_t(pairs) * size_t(d));
    for (int32_t q = 0; q < pairs; ++q) {
      if (pt[size_t(q)] < 0 || pt[size_t(q)] >= tokens)
        throw Error("protocol error: expert dispatch pair outside its tokens");
      std::memcpy(&xs[at + size_t(q) * size_t(d)], x + int64_t(pt[size_t(q)]) * d, size_t(d) * 4);
      ids.push_back(pe[size_t(q)]);
    }
    first_pair[size_t(s) + 1] = first_pair[size_t(s)] + pairs;
  }
  const int64_t total = first_pair[size_t(ranks)];
  std::vector<float> ys(size_t(total * d));
  ExpertRequest mine{req.layer, total, 1, d, xs.data(), ids.data(), ys.data()};
  local_.run(mine);
  auto t2 = clock::now();

  // 3. Return each source its pairs' outputs, in the order it sent them.
  std::vector<std::vector<std::byte>> back(static_cast<size_t>(ranks));
  for (int s = 0; s < ranks; ++s)
    append(back[size_t(s)], ys.data() + first_pair[size_t(s)] * d,
           size_t((first_pair[size_t(s) + 1] - first_pair[size_t(s)]) * d));
  auto res = all_to_all(ch_, kTagCombine, std::move(back));

  // 4. Place them at (token, k).
  for (int r = 0; r < ranks; ++r) {
    const Dispatch& m = to[size_t(r)];
    const auto& b = res[size_t(r)];
    if (b.size() != m.pair_slot.size() * size_t(d) * 4)
      throw Error("protocol error: expert outputs from rank " + std::to_string(r) + " have the wrong size");
    const float* y = reinterpret_cast<const float*>(b.data());
    for (size_t q = 0; q < m.pair_slot.size(); ++q)
      std::memcpy(req.out + m.pair_slot[q] * d, y + q * size_t(d), size_t(d) * 4);
  }
  auto t3 = clock::now();
  exchange_seconds_ += std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count();
  compute_seconds_ += std::chrono::duration<double>(t2 - t1).count();
}

}  // namespace trillion

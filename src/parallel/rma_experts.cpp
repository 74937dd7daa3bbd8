#include "parallel/rma_experts.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "parallel/wire.hpp"
#include "plan/partition.hpp"

namespace trillion {
namespace {

// Dispatch message to one owner: [i32 tokens][i32 pairs][u64 groups with rows]
// [i32 pair_token[pairs]][i32 pair_expert[pairs]][f32 x[tokens, hidden]].
// Pairs are in (token, k) order; the combine message returns
// f32 out[pairs, hidden] in that order. Group 0's dispatch always travels and
// its mask tells the owner which of the sender's later groups will.
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
    : ch_(channel), local_(local), n_experts_(n_experts), queue_(channel) {}

void RmaExperts::run(const ExpertRequest& req) {
  begin(req);
  serve();
  end();
}

void RmaExperts::step_without_rows(const std::vector<int64_t>& moe_layers, int groups, int64_t top_k,
                                   int64_t hidden) {
  for (int64_t layer : moe_layers) {
    for (int g = 0; g < groups; ++g)
      begin(ExpertRequest{layer, 0, top_k, hidden, nullptr, nullptr, nullptr, g, /*groups_with_rows=*/0});
    serve();
    for (int g = 0; g < groups; ++g) end();
  }
}

void RmaExperts::begin(const ExpertRequest& req) {
  const int ranks = ch_.size();
  const int64_t d = req.hidden, K = req.top_k;
  // Group this rank's (token, k) pairs by owner rank.
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(ranks));  // per owner: request token indices
  std::vector<std::vector<int32_t>> pair_token(static_cast<size_t>(ranks)), pair_expert(static_cast<size_t>(ranks));
  InFlight f{std::vector<std::vector<int64_t>>(static_cast<size_t>(ranks)), req.layer, d, req.out, req.group, true};
  if (req.group < 0 || req.group >= 64) throw Error("RmaExperts: group " + std::to_string(req.group) + " outside 0..63");
  // Group 0 always travels (it carries the mask); a later group's bit must
  // say whether it has rows, since the owners rely on it.
  const bool has_rows = (req.groups_with_rows >> req.group) & 1;
  if (req.group > 0 && has_rows != (req.n > 0))
    throw Error("RmaExperts: group " + std::to_string(req.group) + " has " + std::to_string(req.n) +
                " rows but its bit in groups_with_rows says otherwise");
  if (req.group > 0 && !has_rows) {  // nobody expects this group's dispatch: nothing travels
    f.exchanged = false;
    begun_.push_back(std::move(f));
    return;
  }
  for (int64_t i = 0; i < req.n; ++i) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = req.ids[i * K + k];
      if (e < 0 || e >= n_experts_) throw Error("expert id " + std::to_string(e) + " out of range");
      const size_t o = size_t(owner_of_expert(n_experts_, ranks, e));
      if (tokens[o].empty() || tokens[o].back() != i) tokens[o].push_back(i);
      pair_token[o].push_back(int32_t(tokens[o].size() - 1));
      pair_expert[o].push_back(e);
      f.pair_slot[o].push_back(i * K + k);
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const size_t o = size_t(r);
    const int32_t hdr[2] = {int32_t(tokens[o].size()), int32_t(pair_token[o].size())};
    std::vector<std::byte> b;
    b.reserve(16 + pair_token[o].size() * 8 + tokens[o].size() * size_t(d) * 4);
    append(b, hdr, 2);
    append(b, &req.groups_with_rows, 1);
    append(b, pair_token[o].data(), pair_token[o].size());
    append(b, pair_expert[o].data(), pair_expert[o].size());
    for (int64_t t : tokens[o]) append(b, req.x + t * d, size_t(d));
    queue_.post(r, kTagDispatch, std::move(b));
  }
  begun_.push_back(std::move(f));
}

void RmaExperts::serve() {
  if (begun_.empty()) throw Error("RmaExperts::serve without a begun request");
  const int ranks = ch_.size();
  // Every rank is at the same layer with the same groups (the protocol), so
  // our own requests name the layer the received pairs belong to.
  const int64_t layer = begun_.front().layer, d = begun_.front().hidden;
  const size_t groups = begun_.size();
  // Every pair received for every begun group runs on the experts held here
  // in one pass (pairs become rows of a top-1 request, grouped by expert
  // inside LocalExperts): an expert two groups chose streams its weights once.
  // first_pair[j * ranks + s]: where group j's pairs from rank s start.
  std::vector<int64_t> first_pair(groups * size_t(ranks) + 1, 0);
  std::vector<float> xs;
  std::vector<int32_t> ids;
  if (begun_.front().group != 0) throw Error("RmaExperts::serve: the groups served together must start at group 0");
  std::vector<uint64_t> mask_of(static_cast<size_t>(ranks), 0);  // each sender's groups with rows (from its group 0)
  std::vector<uint8_t> from(groups * size_t(ranks), 0);           // did group j of rank s travel?
  for (size_t j = 0; j < groups; ++j) {
    if (begun_[j].layer != layer) throw Error("RmaExperts::serve: begun requests of different layers");
    const int gj = begun_[j].group;
    for (int s = 0; s < ranks; ++s) {
      const size_t at_pair = j * size_t(ranks) + size_t(s);
      first_pair[at_pair + 1] = first_pair[at_pair];
      if (gj != 0 && !((mask_of[size_t(s)] >> gj) & 1)) continue;  // rank s has no rows in this group
      from[at_pair] = 1;
      const std::vector<std::byte> b = queue_.take(s, kTagDispatch);
      const std::byte* p = b.data();
      const std::byte* end = b.data() + b.size();
      int32_t hdr[2];
      uint64_t mask = 0;
      p = take(p, end, hdr, 2, s);
      p = take(p, end, &mask, 1, s);
      if (gj == 0) mask_of[size_t(s)] = mask;
      const int32_t tokens = hdr[0], pairs = hdr[1];
      if (tokens < 0 || pairs < 0)
        throw Error("protocol error: bad expert dispatch header from rank " + std::to_string(s));
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
      first_pair[at_pair + 1] = first_pair[at_pair] + pairs;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t total = first_pair.back();
  std::vector<float> ys(size_t(total * d));
  local_.run(ExpertRequest{layer, total, 1, d, xs.data(), ids.data(), ys.data()});
  compute_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Each source gets its pairs' outputs back, group by group, in the order it sent them.
  for (size_t j = 0; j < groups; ++j) {
    for (int s = 0; s < ranks; ++s) {
      const size_t at_pair = j * size_t(ranks) + size_t(s);
      if (!from[at_pair]) continue;
      std::vector<std::byte> back;
      append(back, ys.data() + first_pair[at_pair] * d, size_t((first_pair[at_pair + 1] - first_pair[at_pair]) * d));
      queue_.post(s, kTagCombine, std::move(back));
    }
    served_.push_back(std::move(begun_.front()));
    begun_.pop_front();
  }
}

void RmaExperts::end() {
  if (served_.empty()) throw Error("RmaExperts::end without a served request");
  InFlight f = std::move(served_.front());
  served_.pop_front();
  if (!f.exchanged) return;  // a later group without rows: nothing went out, nothing comes back
  const int64_t d = f.hidden;
  for (int r = 0; r < ch_.size(); ++r) {
    const std::vector<std::byte> b = queue_.take(r, kTagCombine);
    const auto& slots = f.pair_slot[size_t(r)];
    if (b.size() != slots.size() * size_t(d) * 4)
      throw Error("protocol error: expert outputs from rank " + std::to_string(r) + " have the wrong size");
    const float* y = reinterpret_cast<const float*>(b.data());
    for (size_t q = 0; q < slots.size(); ++q) std::memcpy(f.out + slots[q] * d, y + q * size_t(d), size_t(d) * 4);
  }
}

}  // namespace trillion

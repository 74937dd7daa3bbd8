#include "tokenizer/bpe.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace trillion {

BpeModel::BpeModel(BpeModel&& o) noexcept
    : tokens_(std::move(o.tokens_)),
      ids_(std::move(o.ids_)),
      merges_(std::move(o.merges_)),
      ignore_merges_(o.ignore_merges_),
      cache_(std::move(o.cache_)) {
  std::copy(std::begin(o.byte_id_), std::end(o.byte_id_), byte_id_);
}

void BpeModel::index() {
  ids_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (!tokens_[id].empty()) ids_.emplace(tokens_[id], int32_t(id));
  for (int b = 0; b < 256; ++b) {
    const auto it = ids_.find(std::string(1, char(b)));
    byte_id_[b] = it == ids_.end() ? -1 : it->second;
  }
}

BpeModel BpeModel::from_merges(std::vector<std::string> tokens,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               bool ignore_merges, const std::string& source) {
  BpeModel m;
  m.tokens_ = std::move(tokens);
  m.ignore_merges_ = ignore_merges;
  m.index();
  m.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [l, r] = merges[rank];
    const auto a = m.ids_.find(l), b = m.ids_.find(r), c = m.ids_.find(l + r);
    if (a == m.ids_.end() || b == m.ids_.end() || c == m.ids_.end())
      throw FormatError(source + ": merge " + std::to_string(rank) + " names a token not in the vocabulary");
    m.merges_.emplace(key(a->second, b->second), Merge{int32_t(rank), c->second});  // first (lowest) rank wins
  }
  return m;
}

BpeModel BpeModel::from_ranks(std::vector<std::string> tokens, const std::string& source) {
  BpeModel m;
  m.tokens_ = std::move(tokens);
  m.ignore_merges_ = true;  // tiktoken emits a piece that is a token whole
  m.index();
  for (size_t id = 0; id < m.tokens_.size(); ++id) {
    const std::string& t = m.tokens_[id];
    for (size_t cut = 1; cut < t.size(); ++cut) {
      const auto a = m.ids_.find(t.substr(0, cut));
      if (a == m.ids_.end()) continue;
      const auto b = m.ids_.find(t.substr(cut));
      if (b == m.ids_.end()) continue;
      m.merges_.emplace(key(a->second, b->second), Merge{int32_t(id), int32_t(id)});
    }
  }
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view bytes) const {
  const auto it = ids_.find(std::string(bytes));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_ || piece.size() == 1) {
    if (auto id = token_to_id(piece)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCacheMaxPiece;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_loop(piece, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheEntries) cache_.emplace(piece, std::vector<int32_t>(out.begin() + long(first), out.end()));
  }
}

// Symbols start as single bytes in a linked list; a min-heap of candidate
// pairs keyed by (rank, position) picks the next merge. A popped candidate
// is stale when either symbol has changed since it was pushed. O(n log n).
void BpeModel::merge_loop(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = int32_t(piece.size());
  std::vector<Symbol> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = byte_id_[static_cast<unsigned char>(piece[size_t(i)])];
    if (id < 0) throw FormatError("tokenizer has no token for byte " + std::to_string(int(static_cast<unsigned char>(piece[size_t(i)]))));
    sym[size_t(i)] = {id, i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate> heap;
  heap.reserve(size_t(n) * 2);
  auto push = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = sym[size_t(l)].next;
    if (r < 0) return;
    const auto it = merges_.find(key(sym[size_t(l)].id, sym[size_t(r)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, sym[size_t(l)].id, sym[size_t(r)].id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[size_t(c.pos)];
    if (!l.alive || l.id != c.left || l.next < 0) continue;
    Symbol& r = sym[size_t(l.next)];
    if (r.id != c.right) continue;
    l.id = merges_.find(key(c.left, c.right))->second.id;
    r.alive = false;
    l.next = r.next;
    if (l.next >= 0) sym[size_t(l.next)].prev = c.pos;
    push(l.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

}  // namespace trillion

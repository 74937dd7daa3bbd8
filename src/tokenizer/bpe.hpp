// Byte-pair encoding over raw bytes, shared by tokenizer.json (merges listed
// by rank) and tiktoken (a token's rank is its id; any split of a token into
// two tokens is a merge of that rank). One piece in, token ids out.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trillion {

class BpeModel {
 public:
  // tokens: raw bytes per id ("" for ids the model does not define).
  // merges: (left, right) raw-byte pairs in rank order, as tokenizer.json
  // lists them; a pair whose parts or concatenation is not a token is skipped.
  // ignore_merges: a piece that is itself a token is emitted whole.
  static BpeModel from_merges(std::vector<std::string> tokens,
                              const std::vector<std::pair<std::string, std::string>>& merges,
                              bool ignore_merges, const std::string& source);
  // tiktoken: tokens[rank] = raw bytes; merge rank = rank of the result.
  static BpeModel from_ranks(std::vector<std::string> tokens, const std::string& source);

  BpeModel(BpeModel&& other) noexcept;

  // Appends the ids of one pre-tokenized piece to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view bytes) const;
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  BpeModel() = default;
  void index();
  void merge_loop(std::string_view piece, std::vector<int32_t>& out) const;

  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  std::vector<std::string> tokens_;                 // [id] raw bytes
  std::unordered_map<std::string, int32_t> ids_;    // raw bytes -> id
  std::unordered_map<uint64_t, Merge> merges_;      // (left id, right id) -> merge
  int32_t byte_id_[256];                            // single-byte tokens (-1: none)
  bool ignore_merges_ = false;

  // Pieces repeat (" the", "\n"): remember the ids of recent ones.
  static constexpr size_t kCacheEntries = 1 << 16;
  static constexpr size_t kCacheMaxPiece = 64;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace trillion

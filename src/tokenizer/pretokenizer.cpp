#include "tokenizer/pretokenizer.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace trillion {

namespace {

struct Span {
  size_t begin, end;
  bool match;
};

// One Split step on one piece, following tokenizers' NormalizedString::split.
void split_piece(const SplitStep& step, std::string_view piece, std::vector<Span>& spans,
                 std::vector<std::string_view>& out) {
  spans.clear();
  size_t prev = 0;
  step.regex->find_all(piece, [&](size_t b, size_t e) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  });
  if (prev != piece.size()) spans.push_back({prev, piece.size(), false});
  if (step.invert)
    for (auto& s : spans) s.match = !s.match;

  std::vector<Span> merged;
  std::vector<Span>* result = &spans;
  // Spans in order, each joined to the one before when joins(its match, the
  // previous span's match) says so.
  auto merge_forward = [&](auto joins) {
    bool previous_match = false;
    for (const auto& s : spans) {
      if (joins(s.match, previous_match) && !merged.empty())
        merged.back().end = s.end;
      else
        merged.push_back(s);
      previous_match = s.match;
    }
    result = &merged;
  };
  switch (step.behavior) {
    case SplitBehavior::isolated:
      break;
    case SplitBehavior::removed:
      merged.reserve(spans.size());
      for (const auto& s : spans)
        if (!s.match) merged.push_back(s);
      result = &merged;
      break;
    case SplitBehavior::merged_with_previous:  // a match joins the text before it
      merge_forward([](bool match, bool previous) { return match && !previous; });
      break;
    case SplitBehavior::merged_with_next: {
      bool previous_match = false;
      for (size_t i = spans.size(); i-- > 0;) {
        const auto& s = spans[i];
        if (s.match && !previous_match && !merged.empty())
          merged.back().begin = s.begin;
        else
          merged.push_back(s);
        previous_match = s.match;
      }
      std::reverse(merged.begin(), merged.end());
      result = &merged;
      break;
    }
    case SplitBehavior::contiguous:  // runs of matches, and of the text between them, join
      merge_forward([](bool match, bool previous) { return match == previous; });
      break;
  }
  for (const auto& s : *result)
    if (s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
}

}  // namespace

SplitBehavior parse_split_behavior(std::string_view name, const std::string& source) {
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  throw FormatError(source + ": unknown Split behavior '" + std::string(name) + "'");
}

void Pretokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  std::vector<std::string_view> current{text}, next;
  std::vector<Span> spans;
  for (const auto& step : steps_) {
    next.clear();
    for (const auto piece : current) split_piece(step, piece, spans, next);
    current.swap(next);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace trillion

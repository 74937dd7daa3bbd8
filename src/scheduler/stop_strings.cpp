#include "scheduler/stop_strings.hpp"

#include <algorithm>

namespace trillion {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) longest_ = std::max(longest_, s.size());
}

void StopMatcher::pass(const std::string& piece) {
  if (stopped_) return;
  text_ += piece;
  emitted_ = armed_ = text_.size();
}

bool StopMatcher::push(const std::string& piece) {
  if (stopped_ || piece.empty()) return stopped_;
  const size_t old = text_.size();
  text_ += piece;
  // Only a match ending in the new piece is new: search from where one could start.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    const size_t from = std::max(armed_, old >= s.size() - 1 ? old - (s.size() - 1) : 0);
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    emitted_ = cut;
    stopped_ = true;
    return true;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (size_t n = std::min(longest_ - 1, text_.size()); n > hold; --n) {
    const std::string_view tail(text_.data() + text_.size() - n, n);
    for (const auto& s : stops_)
      if (s.size() > n && std::string_view(s).substr(0, n) == tail) {
        hold = n;
        break;
      }
  }
  emitted_ = std::max(emitted_, text_.size() - hold);
  return false;
}

}  // namespace trillion

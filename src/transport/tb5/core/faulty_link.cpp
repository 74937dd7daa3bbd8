#include "transport/tb5/core/faulty_link.hpp"

#include <cstdio>

namespace trillion::tb5 {

FaultyLink::FaultyLink(std::unique_ptr<Link> inner, FaultConfig cfg)
    : inner_(std::move(inner)), cfg_(cfg), rng_(cfg.seed) {}

void FaultyLink::release_held() {
  if (!held_) return;
  held_ = false;
  inner_->send(held_peer_, held_frame_);
}

void FaultyLink::send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                            std::span<const uint8_t> body2) {
  std::lock_guard lock(mu_);
  ++counts_.sent;
  const double r = uni_(rng_);
  if (r < cfg_.loss) {
    ++counts_.lost;
    return;
  }
  if (!held_ && r < cfg_.loss + cfg_.reorder) {
    ++counts_.reordered;
    held_ = true;
    held_peer_ = peer;
    held_frame_.assign(head.begin(), head.end());  // kept (the caller's buffers move on); capacity reused
    held_frame_.insert(held_frame_.end(), body.begin(), body.end());
    held_frame_.insert(held_frame_.end(), body2.begin(), body2.end());
    return;
  }
  inner_->send_parts(peer, head, body, body2);
  if (uni_(rng_) < cfg_.duplicate) {
    ++counts_.duplicated;
    inner_->send_parts(peer, head, body, body2);
  }
  release_held();  // the held frame goes out after this one: overtaken
}

size_t FaultyLink::poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) {
  {
    // A held frame must not wait for a next send that may never come.
    std::lock_guard lock(mu_);
    release_held();
  }
  return inner_->poll(on_frame, max);
}

std::string FaultyLink::describe() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, " (injected loss %g, duplicate %g, reorder %g)", cfg_.loss, cfg_.duplicate,
                cfg_.reorder);
  return inner_->describe() + buf;
}

FaultCounts FaultyLink::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

}  // namespace trillion::tb5

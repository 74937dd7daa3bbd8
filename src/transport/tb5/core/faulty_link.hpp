// Fault injection on the sending side of any Link: each frame is lost with
// probability `loss`, sent twice with probability `duplicate`, or held back
// and sent after the next frame (overtaken) with probability `reorder`.
// Deterministic for a seed, so a failing run can be replayed. Set from
// btl_tb5_inject_loss / _duplicate / _reorder / _seed (docs/tb5.md).
#pragma once
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "transport/tb5/core/link.hpp"

namespace trillion::tb5 {

struct FaultConfig {
  double loss = 0, duplicate = 0, reorder = 0;
  uint64_t seed = 1;
  bool any() const { return loss > 0 || duplicate > 0 || reorder > 0; }
};

struct FaultCounts {
  uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0;
};

class FaultyLink final : public Link {
 public:
  FaultyLink(std::unique_ptr<Link> inner, FaultConfig cfg);
  size_t mtu() const override { return inner_->mtu(); }
  size_t frame_size(uint32_t peer) const override { return inner_->frame_size(peer); }
  bool checks_payload() const override { return inner_->checks_payload(); }
  std::vector<uint8_t> address() const override { return inner_->address(); }
  void connect(uint32_t peer, std::span<const uint8_t> a) override { inner_->connect(peer, a); }
  void send(uint32_t peer, std::span<const uint8_t> frame) override { send_parts(peer, frame, {}, {}); }
  void send_parts(uint32_t peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
                  std::span<const uint8_t> body2) override;
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override;
  std::string describe() const override;
  FaultCounts counts() const;

 private:
  void release_held();  // with mu_ held
  std::unique_ptr<Link> inner_;
  FaultConfig cfg_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  bool held_ = false;
  uint32_t held_peer_ = 0;
  std::vector<uint8_t> held_frame_;
  FaultCounts counts_;
};

}  // namespace trillion::tb5

// An in-memory Link for the engine's unit tests: frames go into the
// destination's inbox; a filter decides, per frame, how many copies arrive
// (0 lost, 1, 2 duplicated), and a test may hold frames back and release
// them later (reordering). Fully deterministic, and the tests drive a fake
// clock, so retransmission and death timing are exact.
#pragma once
#include <deque>
#include <functional>
#include <vector>

#include "transport/tb5/core/link.hpp"

namespace trillion::tb5::test {

struct MemoryNet {
  explicit MemoryNet(uint32_t n) : inbox(n) {}
  std::vector<std::deque<std::vector<uint8_t>>> inbox;
  std::function<int(uint32_t from, uint32_t to, std::span<const uint8_t> frame)> filter;
  uint64_t frames = 0;
};

class MemoryLink final : public Link {
 public:
  MemoryLink(MemoryNet& net, uint32_t self, size_t mtu = 256) : net_(net), self_(self), mtu_(mtu) {}
  size_t mtu() const override { return mtu_; }
  std::vector<uint8_t> address() const override { return {uint8_t(self_)}; }
  void connect(uint32_t, std::span<const uint8_t>) override {}
  void send(uint32_t peer, std::span<const uint8_t> frame) override {
    ++net_.frames;
    const int copies = net_.filter ? net_.filter(self_, peer, frame) : 1;
    for (int i = 0; i < copies; ++i) net_.inbox[peer].emplace_back(frame.begin(), frame.end());
  }
  size_t poll(const std::function<void(std::span<const uint8_t>)>& on_frame, size_t max) override {
    size_t n = 0;
    auto& q = net_.inbox[self_];
    while (n < max && !q.empty()) {
      auto f = std::move(q.front());
      q.pop_front();
      on_frame(f);
      ++n;
    }
    return n;
  }
  std::string describe() const override { return "memory"; }
  bool checks_payload() const override { return checks; }
  bool checks = false;  // stands for a link that checks payloads itself (udp)

 private:
  MemoryNet& net_;
  uint32_t self_;
  size_t mtu_;
};

}  // namespace trillion::tb5::test

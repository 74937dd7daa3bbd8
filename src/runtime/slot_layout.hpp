// Where everything lives in an RmaChannel window: pure arithmetic, shared by
// the sender (computing target displacements) and the receiver (reading its
// own memory), and unit-testable without MPI.
//
// Window of one rank (all ranks have the same layout):
//   credits: one 64-byte cell per peer p; cell p holds how many of this
//            rank's slots to p that p has consumed (written by p, monotonic)
//   rings:   per source rank s, `slots` slots; slot k of ring s receives
//            s's slot-sequence numbers seq with (seq - 1) % slots == k
// Slot: a 64-byte SlotHeader, then up to slot_bytes of payload.
#pragma once
#include <cstddef>
#include <cstdint>

namespace trillion {

struct SlotHeader {
  // The notification: written by its own put after the rest of the slot is
  // complete at the target (notified put). 0 = never written.
  uint64_t seq;
  int32_t tag;
  uint32_t chunk;          // index of this chunk within its message
  uint64_t chunks;         // chunks in the message (>= 1; a 0-byte message has one empty chunk)
  uint64_t message_bytes;  // total payload of the message
  uint64_t chunk_bytes;    // payload in this slot
  uint64_t reserved[3];
};
static_assert(sizeof(SlotHeader) == 64, "one cache line");

class SlotLayout {
 public:
  static constexpr size_t kAlign = 64;

  SlotLayout(int ranks, size_t slot_bytes, int slots)
      : ranks_(ranks), slot_bytes_(slot_bytes), slots_(slots) {}

  int ranks() const { return ranks_; }
  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }

  size_t slot_stride() const { return sizeof(SlotHeader) + round_up(slot_bytes_, kAlign); }
  size_t credit_offset(int peer) const { return size_t(peer) * kAlign; }
  size_t rings_offset() const { return round_up(size_t(ranks_) * kAlign, 4096); }
  // Offset of the slot that receives `src`'s slot sequence number `seq` (>= 1).
  size_t slot_offset(int src, uint64_t seq) const {
    size_t index = size_t(src) * size_t(slots_) + size_t((seq - 1) % uint64_t(slots_));
    return rings_offset() + index * slot_stride();
  }
  size_t window_bytes() const {
    return rings_offset() + size_t(ranks_) * size_t(slots_) * slot_stride();
  }
  // Slots a message of `bytes` occupies (an empty message still needs one).
  uint64_t chunks(size_t bytes) const {
    return bytes == 0 ? 1 : (uint64_t(bytes) + slot_bytes_ - 1) / slot_bytes_;
  }

  static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

 private:
  int ranks_;
  size_t slot_bytes_;
  int slots_;
};

}  // namespace trillion

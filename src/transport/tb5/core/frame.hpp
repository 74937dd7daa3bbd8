// The tb5 frame: one datagram (udp) or one SEND (verbs), at most one MTU.
// Every frame carries the sender's rank, its cumulative acknowledgement and
// selective-acknowledgement bitmap and its receive credit, so acks ride on
// data in both directions; a checksum rejects torn or corrupted frames (the
// reliability above treats them as lost). Fields are little-endian on the
// wire, encoded byte by byte, so mixed hosts agree.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace trillion::tb5 {

enum class FrameType : uint8_t {
  data = 1,       // a fragment of a message, sequenced and acknowledged
  ack = 2,        // acknowledgement and credit only
  heartbeat = 3,  // liveness only (sent by a thread, carries no state)
  bye = 4,        // the sender is closing: stop expecting it
  put = 5,        // a fragment of a put: sequenced like data; the message's first
                  // 8 bytes (little-endian) are where in the receiver's memory the rest goes
};

struct FrameHeader {
  FrameType type = FrameType::data;
  bool ack_now = false;     // data: acknowledge without delay (the sender is waiting to reuse a buffer)
  bool unhashed = false;    // the checksum covers the header only: the link checks payloads itself (Link::checks_payload)
  uint8_t tag = 0;          // the message's active-message tag (data)
  uint32_t src = 0;         // sender's rank
  uint32_t seq = 0;         // data: this frame's sequence number
  uint32_t ack = 0;         // next sequence number the sender expects from the receiver
  uint64_t sack = 0;        // bit i: frame ack+1+i already received
  uint32_t window = 0;      // the sender accepts sequence numbers < ack + window
  uint32_t msg_len = 0;     // data: length of the whole message
  uint32_t frag = 0;        // data: index of this fragment
  uint32_t nfrags = 0;      // data: fragments in the message
  uint16_t payload_len = 0;
};

// Little-endian 64-bit fields, byte by byte: the header's sack, and a put's
// address at the head of its message (Engine::put writes it, Engine::place reads it).
void put64(uint8_t* p, uint64_t v);
uint64_t get64(const uint8_t* p);

constexpr uint32_t frame_magic = 0x46354254;  // "TB5F"
constexpr size_t frame_header_size = 48;

// The checksum: XXH3-64 of the payload seeds XXH3-64 of the header's first
// 44 bytes (everything before the checksum field); its low 32 bits are
// stored. A frame flagged unhashed (its sender's link checks payloads, as
// UDP's checksum does) is checksummed with a payload hash of 0: the header
// only, flag included. One-shot calls, no hash state; the payload's hash is computed once
// per frame and kept by the sender, so a frame whose acknowledgement fields
// change at each transmission rehashes 44 bytes, not the payload.
uint64_t payload_hash(std::span<const uint8_t> payload);
uint64_t payload_hash(std::span<const uint8_t> a, std::span<const uint8_t> b);  // of a then b

// Writes the 48-byte header for a payload of payload_len bytes whose hash is
// phash (payload_hash), checksum included.
void encode_header(const FrameHeader& h, uint16_t payload_len, uint64_t phash, uint8_t* out);

// Writes header + payload into out (>= frame_header_size + payload.size()),
// returns the frame's length.
size_t encode_frame(const FrameHeader& h, std::span<const uint8_t> payload, uint8_t* out);

// Rewrites the ack/sack/window fields and the checksum of an encoded header
// (a retransmission carries the current acknowledgement, not the old one);
// phash is the hash of the frame's payload.
void refresh_header_ack(uint8_t* head, uint64_t phash, uint32_t ack, uint64_t sack, uint32_t window);
// The same on a whole frame (header followed by its payload).
void refresh_frame_ack(uint8_t* frame, size_t len, uint32_t ack, uint64_t sack, uint32_t window);

struct DecodedFrame {
  FrameHeader header;
  std::span<const uint8_t> payload;
};
// nullopt for anything that is not a whole, intact frame (bad magic, length
// or checksum).
std::optional<DecodedFrame> decode_frame(std::span<const uint8_t> bytes);

// Modular sequence comparison (sequence numbers wrap at 2^32 on the wire).
inline bool seq_before(uint32_t a, uint32_t b) { return int32_t(a - b) < 0; }

// The 64-bit count a 32-bit wire number stands for, taken as the one nearest
// `near` (a count this end keeps, e.g. the next frame it expects). The engine
// counts frames in 64 bits so that nothing it derives from a sequence number
// (a receive slot, seq mod window) jumps at 2^32; at ~4 TB per 2^32 frames
// of 1 KiB, a 64-bit count never wraps.
inline uint64_t seq_lift(uint32_t wire, uint64_t near) { return near + uint64_t(int64_t(int32_t(wire - uint32_t(near)))); }

}  // namespace trillion::tb5

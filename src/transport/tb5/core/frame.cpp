#include "transport/tb5/core/frame.hpp"

#include <cstring>

#include "transport/tb5/core/checksum.hpp"

namespace trillion::tb5 {
namespace {

// Layout (offsets): magic 0, type 4 (bit 7: ack_now, bit 6: unhashed), tag 5, payload_len 6, src 8, seq 12,
// ack 16, window 20, sack 24, msg_len 32, frag 36, nfrags 40, checksum 44.
constexpr size_t off_checksum = 44;

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v); p[1] = uint8_t(v >> 8); }
void put32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i)); }
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t header_checksum(const uint8_t* head, uint64_t phash) {
  return uint32_t(hash64(head, off_checksum, phash ^ frame_magic));
}

}  // namespace

void put64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i)); }
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t payload_hash(std::span<const uint8_t> payload) { return hash64(payload.data(), payload.size(), 0); }

uint64_t payload_hash(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return b.empty() ? payload_hash(a) : a.empty() ? payload_hash(b) : hash64_2(a.data(), a.size(), b.data(), b.size());
}

void encode_header(const FrameHeader& h, uint16_t payload_len, uint64_t phash, uint8_t* out) {
  put32(out + 0, frame_magic);
  out[4] = uint8_t(uint8_t(h.type) | (h.ack_now ? 0x80 : 0) | (h.unhashed ? 0x40 : 0));
  out[5] = h.tag;
  put16(out + 6, payload_len);
  put32(out + 8, h.src);
  put32(out + 12, h.seq);
  put32(out + 16, h.ack);
  put32(out + 20, h.window);
  put64(out + 24, h.sack);
  put32(out + 32, h.msg_len);
  put32(out + 36, h.frag);
  put32(out + 40, h.nfrags);
  put32(out + off_checksum, header_checksum(out, phash));
}

size_t encode_frame(const FrameHeader& h, std::span<const uint8_t> payload, uint8_t* out) {
  if (!payload.empty()) std::memcpy(out + frame_header_size, payload.data(), payload.size());
  encode_header(h, uint16_t(payload.size()), h.unhashed ? 0 : payload_hash(payload), out);
  return frame_header_size + payload.size();
}

void refresh_header_ack(uint8_t* head, uint64_t phash, uint32_t ack, uint64_t sack, uint32_t window) {
  put32(head + 16, ack);
  put32(head + 20, window);
  put64(head + 24, sack);
  put32(head + off_checksum, header_checksum(head, phash));
}

void refresh_frame_ack(uint8_t* frame, size_t len, uint32_t ack, uint64_t sack, uint32_t window) {
  const bool unhashed = frame[4] & 0x40;
  refresh_header_ack(frame, unhashed ? 0 : payload_hash({frame + frame_header_size, len - frame_header_size}), ack, sack,
                     window);
}

std::optional<DecodedFrame> decode_frame(std::span<const uint8_t> b) {
  if (b.size() < frame_header_size) return std::nullopt;
  const uint8_t* p = b.data();
  if (get32(p) != frame_magic) return std::nullopt;
  DecodedFrame d;
  FrameHeader& h = d.header;
  if ((p[4] & 0x3f) < 1 || (p[4] & 0x3f) > 5) return std::nullopt;
  h.type = FrameType(p[4] & 0x3f);
  h.ack_now = p[4] & 0x80;
  h.unhashed = p[4] & 0x40;
  h.tag = p[5];
  h.payload_len = get16(p + 6);
  if (frame_header_size + h.payload_len != b.size()) return std::nullopt;
  d.payload = b.subspan(frame_header_size);
  if (get32(p + off_checksum) != header_checksum(p, h.unhashed ? 0 : payload_hash(d.payload))) return std::nullopt;
  h.src = get32(p + 8);
  h.seq = get32(p + 12);
  h.ack = get32(p + 16);
  h.window = get32(p + 20);
  h.sack = get64(p + 24);
  h.msg_len = get32(p + 32);
  h.frag = get32(p + 36);
  h.nfrags = get32(p + 40);
  return d;
}

}  // namespace trillion::tb5

#include "transport/tb5/core/frame.hpp"

#include <xxhash.h>

#include <cstring>

namespace trillion::tb5 {
namespace {

// Layout (offsets): magic 0, type 4, tag 5, payload_len 6, src 8, seq 12,
// ack 16, window 20, sack 24, msg_len 32, frag 36, nfrags 40, checksum 44.
constexpr size_t off_checksum = 44;

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v); p[1] = uint8_t(v >> 8); }
void put32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i)); }
void put64(uint8_t* p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i)); }
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// XXH32 over the frame with the checksum field zeroed (libxxhash, already a
// dependency of the project: fast, and a better detector than a simple sum).
uint32_t frame_checksum(const uint8_t* frame, size_t len) {
  uint8_t head[frame_header_size];
  std::memcpy(head, frame, frame_header_size);
  put32(head + off_checksum, 0);
  XXH32_state_t* st = XXH32_createState();
  XXH32_reset(st, frame_magic);
  XXH32_update(st, head, frame_header_size);
  XXH32_update(st, frame + frame_header_size, len - frame_header_size);
  uint32_t h = XXH32_digest(st);
  XXH32_freeState(st);
  return h;
}

}  // namespace

size_t encode_frame(const FrameHeader& h, std::span<const uint8_t> payload, uint8_t* out) {
  put32(out + 0, frame_magic);
  out[4] = uint8_t(h.type);
  out[5] = h.tag;
  put16(out + 6, uint16_t(payload.size()));
  put32(out + 8, h.src);
  put32(out + 12, h.seq);
  put32(out + 16, h.ack);
  put32(out + 20, h.window);
  put64(out + 24, h.sack);
  put32(out + 32, h.msg_len);
  put32(out + 36, h.frag);
  put32(out + 40, h.nfrags);
  if (!payload.empty()) std::memcpy(out + frame_header_size, payload.data(), payload.size());
  const size_t len = frame_header_size + payload.size();
  put32(out + off_checksum, frame_checksum(out, len));
  return len;
}

void refresh_frame_ack(uint8_t* frame, size_t len, uint32_t ack, uint64_t sack, uint32_t window) {
  put32(frame + 16, ack);
  put32(frame + 20, window);
  put64(frame + 24, sack);
  put32(frame + off_checksum, frame_checksum(frame, len));
}

std::optional<DecodedFrame> decode_frame(std::span<const uint8_t> b) {
  if (b.size() < frame_header_size) return std::nullopt;
  const uint8_t* p = b.data();
  if (get32(p) != frame_magic) return std::nullopt;
  DecodedFrame d;
  FrameHeader& h = d.header;
  if (p[4] < 1 || p[4] > 4) return std::nullopt;
  h.type = FrameType(p[4]);
  h.tag = p[5];
  h.payload_len = get16(p + 6);
  if (frame_header_size + h.payload_len != b.size()) return std::nullopt;
  if (get32(p + off_checksum) != frame_checksum(p, b.size())) return std::nullopt;
  h.src = get32(p + 8);
  h.seq = get32(p + 12);
  h.ack = get32(p + 16);
  h.window = get32(p + 20);
  h.sack = get64(p + 24);
  h.msg_len = get32(p + 32);
  h.frag = get32(p + 36);
  h.nfrags = get32(p + 40);
  d.payload = b.subspan(frame_header_size);
  return d;
}

}  // namespace trillion::tb5

// The tb5 frame format: round trip, and every kind of damage rejected.
#define BOOST_TEST_MODULE tb5_core
#include <boost/test/unit_test.hpp>

#include <vector>

#include "transport/tb5/core/frame.hpp"

using namespace trillion::tb5;

namespace {

FrameHeader sample() {
  FrameHeader h;
  h.type = FrameType::data;
  h.tag = 65;
  h.src = 3;
  h.seq = 0xfffffffe;  // near the wrap
  h.ack = 17;
  h.sack = 0x8000000000000005ull;
  h.window = 32;
  h.msg_len = 5000;
  h.frag = 2;
  h.nfrags = 6;
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(frame_round_trip) {
  const std::vector<uint8_t> payload = {1, 2, 3, 250, 0, 9};
  std::vector<uint8_t> buf(frame_header_size + payload.size());
  BOOST_TEST(encode_frame(sample(), payload, buf.data()) == buf.size());
  auto d = decode_frame(buf);
  BOOST_REQUIRE(d);
  const FrameHeader& h = d->header;
  BOOST_TEST(int(h.type) == int(FrameType::data));
  BOOST_TEST(h.tag == 65);
  BOOST_TEST(h.src == 3u);
  BOOST_TEST(h.seq == 0xfffffffeu);
  BOOST_TEST(h.ack == 17u);
  BOOST_TEST(h.sack == 0x8000000000000005ull);
  BOOST_TEST(h.window == 32u);
  BOOST_TEST(h.msg_len == 5000u);
  BOOST_TEST(h.frag == 2u);
  BOOST_TEST(h.nfrags == 6u);
  BOOST_TEST(std::vector<uint8_t>(d->payload.begin(), d->payload.end()) == payload);
  // Little-endian on the wire, whatever the host: the magic's first byte is 'T'.
  BOOST_TEST(buf[0] == 'T');
  BOOST_TEST(buf[12] == 0xfe);  // seq, low byte first
}

BOOST_AUTO_TEST_CASE(frame_damage_is_rejected) {
  const std::vector<uint8_t> payload(100, 7);
  std::vector<uint8_t> buf(frame_header_size + payload.size());
  encode_frame(sample(), payload, buf.data());
  for (size_t i = 0; i < buf.size(); i += 7) {  // any flipped bit, header or payload
    auto bad = buf;
    bad[i] ^= 0x10;
    BOOST_TEST(!decode_frame(bad), "flipped byte " << i);
  }
  BOOST_TEST(!decode_frame(std::span(buf).first(buf.size() - 1)));  // truncated
  auto longer = buf;
  longer.push_back(0);
  BOOST_TEST(!decode_frame(longer));  // trailing garbage
  BOOST_TEST(!decode_frame(std::span(buf).first(10)));
}

// A frame whose link checks payloads (udp) is checksummed over its header
// only: header damage, the flag included, is still caught; payload damage is
// left to the link; a refreshed acknowledgement keeps it valid.
BOOST_AUTO_TEST_CASE(unhashed_frames_check_their_header) {
  const std::vector<uint8_t> payload(100, 7);
  FrameHeader h = sample();
  h.unhashed = true;
  std::vector<uint8_t> buf(frame_header_size + payload.size());
  encode_frame(h, payload, buf.data());
  auto d = decode_frame(buf);
  BOOST_REQUIRE(d);
  BOOST_TEST(d->header.unhashed);
  for (size_t i = 0; i < frame_header_size; ++i) {
    auto bad = buf;
    bad[i] ^= 0x40;  // at byte 4: the flag itself
    BOOST_TEST(!decode_frame(bad), "flipped header byte " << i);
  }
  auto payload_flip = buf;
  payload_flip[frame_header_size + 3] ^= 1;
  BOOST_TEST(decode_frame(payload_flip).has_value());
  refresh_frame_ack(buf.data(), buf.size(), 5, 0, 8);
  BOOST_TEST(decode_frame(buf).has_value());
  // The same frame hashed: a payload flip is caught.
  h.unhashed = false;
  encode_frame(h, payload, buf.data());
  BOOST_TEST(!decode_frame(buf)->header.unhashed);
  buf[frame_header_size + 3] ^= 1;
  BOOST_TEST(!decode_frame(buf));
}

BOOST_AUTO_TEST_CASE(refreshed_ack_stays_valid) {
  std::vector<uint8_t> buf(frame_header_size + 3);
  const uint8_t p[3] = {4, 5, 6};
  encode_frame(sample(), p, buf.data());
  refresh_frame_ack(buf.data(), buf.size(), 99, 0x3, 16);
  auto d = decode_frame(buf);
  BOOST_REQUIRE(d);
  BOOST_TEST(d->header.ack == 99u);
  BOOST_TEST(d->header.sack == 0x3u);
  BOOST_TEST(d->header.window == 16u);
  BOOST_TEST(d->header.seq == 0xfffffffeu);
}

BOOST_AUTO_TEST_CASE(sequence_comparison_wraps) {
  BOOST_TEST(seq_before(0xffffffffu, 0u));
  BOOST_TEST(!seq_before(0u, 0xffffffffu));
  BOOST_TEST(seq_before(5u, 6u));
  BOOST_TEST(!seq_before(6u, 6u));
}

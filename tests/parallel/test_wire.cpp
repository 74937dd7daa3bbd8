// The step and result messages carry speculative decoding's fields
// (StepInput::mtp_next / drafts, StepOutput::drafts) between ranks exactly,
// leave them empty when absent, and refuse mismatched or truncated ones.
#define BOOST_TEST_MODULE wire
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "parallel/wire.hpp"

using namespace trillion;

namespace {

StepInput speculative_step() {
  StepInput in;
  in.tokens = {5, 9, 11, 3};
  in.batch = Batch{{{0, 7}, {0, 8}, {2, 0}, {2, 1}}};
  in.batch.released = {1};
  in.logit_rows = {0, 1, 3};
  in.sampling.resize(3);
  in.sampling[1].temperature = 0.5f;
  in.mtp_next = {kChosenNext, kChosenNext, 42, kChosenNext};
  in.drafts = {9, -1, -1};
  return in;
}

}  // namespace

BOOST_AUTO_TEST_CASE(step_round_trip_with_speculative_fields) {
  const StepInput in = speculative_step();
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};  // hidden 2
  const WireStep s = decode_step(encode_step(77, in, x.data(), 2), 2);
  BOOST_TEST(s.ticket == 77u);
  BOOST_TEST(s.input.tokens == in.tokens);
  BOOST_TEST(s.input.logit_rows == in.logit_rows);
  BOOST_TEST(s.input.mtp_next == in.mtp_next);
  BOOST_TEST(s.input.drafts == in.drafts);
  BOOST_TEST(s.input.batch.released == in.batch.released);
  BOOST_TEST(s.input.sampling.at(1).temperature == 0.5f);
  BOOST_TEST(s.x == x);
  // A plain step carries neither.
  StepInput plain = in;
  plain.mtp_next.clear();
  plain.drafts.clear();
  const WireStep p = decode_step(encode_step(1, plain, nullptr, 2), 2);
  BOOST_TEST(p.input.mtp_next.empty());
  BOOST_TEST(p.input.drafts.empty());
}

BOOST_AUTO_TEST_CASE(result_round_trip_with_drafts) {
  StepOutput out;
  out.ticket = 3;
  out.tokens = {9, kNotProduced, 17};
  out.logprobs = {-0.5f, 0, -1.25f};
  out.top_logprobs = {{{9, -0.5f}}, {}, {}};
  out.drafts = {-1, -1, 23};
  const StepOutput back = decode_result(encode_result(out), 32);
  BOOST_TEST(back.tokens == out.tokens);
  BOOST_TEST(back.drafts == out.drafts);
  BOOST_TEST(back.logprobs == out.logprobs);
  BOOST_TEST(back.top_logprobs.at(0).at(0).token == 9);
  out.drafts.clear();
  BOOST_TEST(decode_result(encode_result(out), 32).drafts.empty());
}

BOOST_AUTO_TEST_CASE(head_part_round_trip_and_refusals) {
  HeadPart p;
  p.ticket = 11;
  p.m = 2;
  p.cols = 3;
  p.h = {1, 2, 3, 4};             // [2, hidden 2]
  p.logits = {5, 6, 7, 8, 9, 10};  // [2, 3]
  const std::vector<std::byte> msg = encode_head_part(p, 2);
  const HeadPart back = decode_head_part(msg, 2, 3);
  BOOST_TEST(back.ticket == 11u);
  BOOST_TEST(back.h == p.h);
  BOOST_TEST(back.logits == p.logits);
  BOOST_CHECK_THROW(decode_head_part(msg, 2, 4), Error);  // columns the receiver does not expect
  std::vector<std::byte> cut = msg;
  cut.pop_back();
  BOOST_CHECK_THROW(decode_head_part(cut, 2, 3), Error);
  // A row count that would allocate far past the message is refused before allocating.
  std::vector<std::byte> big = msg;
  const int64_t rows = int64_t(big.size());
  std::memcpy(big.data() + 8, &rows, 8);
  BOOST_CHECK_THROW(decode_head_part(big, 4096, 3), Error);
  p.logits.pop_back();
  BOOST_CHECK_THROW(encode_head_part(p, 2), Error);
}

BOOST_AUTO_TEST_CASE(mismatched_and_truncated_fields_are_refused) {
  StepInput in = speculative_step();
  in.drafts.pop_back();  // one per logit row
  BOOST_CHECK_THROW(encode_step(0, in, nullptr, 2), Error);
  in = speculative_step();
  in.mtp_next.pop_back();  // one per row
  BOOST_CHECK_THROW(encode_step(0, in, nullptr, 2), Error);
  std::vector<std::byte> msg = encode_step(0, speculative_step(), nullptr, 2);
  msg.resize(msg.size() - 4);  // the last draft cut off
  BOOST_CHECK_THROW(decode_step(msg, 2), Error);
  StepOutput out;
  out.tokens = {1, 2};
  out.drafts = {3};
  BOOST_CHECK_THROW(encode_result(out), Error);
}

#include "parallel/wire.hpp"

#include <cstring>
#include <string>

#include "common/error.hpp"

namespace trillion {
namespace {

struct StepHeader {
  uint64_t ticket;
  int64_t n;              // rows
  int64_t m;              // logit rows
  int32_t return_logits;
  int32_t has_x;
  int32_t has_sampling;  // then [m] SamplingParams
  int32_t released;      // then [released] slot ids (Batch::released)
  int32_t has_mtp;       // then [n] mtp_next
  int32_t has_drafts;    // then [m] drafts
  int32_t prefix_ops;    // then [prefix_ops] KvPrefixOp (Batch::prefix_ops)
};

struct ResultHeader {
  uint64_t ticket;
  int64_t m;
  int32_t has_logits;
  int32_t has_logprobs;  // then [m] logprobs, [m] alternative counts, the alternatives
  int32_t has_drafts;    // then [m] drafts
  int32_t pad;
};

class Writer {
 public:
  explicit Writer(size_t reserve) { buf_.reserve(reserve); }
  template <class T> void put(const T* p, size_t count) {
    const size_t at = buf_.size();
    buf_.resize(at + sizeof(T) * count);
    if (count) std::memcpy(buf_.data() + at, p, sizeof(T) * count);
  }
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> b, const char* what) : b_(b), what_(what) {}
  template <class T> void get(T* p, size_t count) {
    const size_t bytes = sizeof(T) * count;
    if (at_ + bytes > b_.size())
      throw Error(std::string("malformed ") + what_ + " message: " + std::to_string(b_.size()) + " bytes, needs more");
    if (count) std::memcpy(p, b_.data() + at_, bytes);
    at_ += bytes;
  }
  void done() const {
    if (at_ != b_.size())
      throw Error(std::string("malformed ") + what_ + " message: " + std::to_string(b_.size() - at_) +
                  " trailing bytes");
  }

 private:
  std::span<const std::byte> b_;
  const char* what_;
  size_t at_ = 0;
};

void check_count(int64_t v, int64_t limit, const char* what) {
  if (v < 0 || v > limit) throw Error(std::string("malformed message: ") + what + " = " + std::to_string(v));
}

}  // namespace

std::vector<std::byte> encode_step(uint64_t ticket, const StepInput& in, const float* x, int64_t hidden) {
  const int64_t n = in.batch.size(), m = int64_t(in.logit_rows.size());
  const bool sampling = !in.sampling.empty();
  if (sampling && int64_t(in.sampling.size()) != m) throw Error("encode_step: sampling params do not match logit rows");
  const int32_t released = int32_t(in.batch.released.size());
  const bool mtp = !in.mtp_next.empty(), drafts = !in.drafts.empty();
  if ((mtp && int64_t(in.mtp_next.size()) != n) || (drafts && int64_t(in.drafts.size()) != m))
    throw Error("encode_step: MTP tokens or drafts do not match the rows");
  const int32_t ops = int32_t(in.batch.prefix_ops.size());
  StepHeader h{ticket, n, m, in.return_logits ? 1 : 0, x ? 1 : 0, sampling ? 1 : 0, released, mtp ? 1 : 0,
               drafts ? 1 : 0, ops};
  Writer w(sizeof h + size_t(n) * 12 + size_t(m) * (8 + sizeof(SamplingParams)) + (x ? size_t(n * hidden) * 4 : 0));
  w.put(&h, 1);
  w.put(in.tokens.data(), size_t(n));
  w.put(in.batch.rows.data(), size_t(n));
  w.put(in.logit_rows.data(), size_t(m));
  if (sampling) w.put(in.sampling.data(), size_t(m));
  w.put(in.batch.released.data(), size_t(released));
  if (mtp) w.put(in.mtp_next.data(), size_t(n));
  if (drafts) w.put(in.drafts.data(), size_t(m));
  w.put(in.batch.prefix_ops.data(), size_t(ops));
  if (x) w.put(x, size_t(n * hidden));
  return w.take();
}

WireStep decode_step(std::span<const std::byte> bytes, int64_t hidden) {
  Reader r(bytes, "step");
  StepHeader h;
  r.get(&h, 1);
  check_count(h.n, int64_t(bytes.size()), "rows");
  check_count(h.m, h.n, "logit rows");
  check_count(h.released, int64_t(bytes.size()), "released slots");
  check_count(h.prefix_ops, int64_t(bytes.size()), "prefix ops");
  WireStep s;
  s.ticket = h.ticket;
  s.input.return_logits = h.return_logits != 0;
  s.input.tokens.resize(size_t(h.n));
  s.input.batch.rows.resize(size_t(h.n));
  s.input.logit_rows.resize(size_t(h.m));
  r.get(s.input.tokens.data(), size_t(h.n));
  r.get(s.input.batch.rows.data(), size_t(h.n));
  r.get(s.input.logit_rows.data(), size_t(h.m));
  if (h.has_sampling) {
    s.input.sampling.resize(size_t(h.m));
    r.get(s.input.sampling.data(), size_t(h.m));
  }
  s.input.batch.released.resize(size_t(h.released));
  r.get(s.input.batch.released.data(), size_t(h.released));
  if (h.has_mtp) {
    s.input.mtp_next.resize(size_t(h.n));
    r.get(s.input.mtp_next.data(), size_t(h.n));
  }
  if (h.has_drafts) {
    s.input.drafts.resize(size_t(h.m));
    r.get(s.input.drafts.data(), size_t(h.m));
  }
  s.input.batch.prefix_ops.resize(size_t(h.prefix_ops));
  r.get(s.input.batch.prefix_ops.data(), size_t(h.prefix_ops));
  if (h.has_x) {
    s.x.resize(size_t(h.n * hidden));
    r.get(s.x.data(), s.x.size());
  }
  r.done();
  return s;
}

std::vector<std::byte> encode_result(const StepOutput& out) {
  const int64_t m = int64_t(out.tokens.size());
  const bool logprobs = !out.logprobs.empty();
  if (logprobs && (int64_t(out.logprobs.size()) != m || int64_t(out.top_logprobs.size()) != m))
    throw Error("encode_result: logprobs do not match tokens");
  const bool drafts = !out.drafts.empty();
  if (drafts && int64_t(out.drafts.size()) != m) throw Error("encode_result: drafts do not match tokens");
  ResultHeader h{out.ticket, m, out.logits.empty() ? 0 : 1, logprobs ? 1 : 0, drafts ? 1 : 0, 0};
  Writer w(sizeof h + size_t(m) * 12 + out.logits.size() * 4);
  w.put(&h, 1);
  w.put(out.tokens.data(), size_t(m));
  if (logprobs) {
    w.put(out.logprobs.data(), size_t(m));
    std::vector<int32_t> counts;
    for (const auto& t : out.top_logprobs) counts.push_back(int32_t(t.size()));
    w.put(counts.data(), counts.size());
    for (const auto& t : out.top_logprobs) w.put(t.data(), t.size());
  }
  if (drafts) w.put(out.drafts.data(), size_t(m));
  w.put(out.logits.data(), out.logits.size());
  return w.take();
}

StepOutput decode_result(std::span<const std::byte> bytes, int64_t vocab) {
  Reader r(bytes, "result");
  ResultHeader h;
  r.get(&h, 1);
  check_count(h.m, int64_t(bytes.size()), "result rows");
  StepOutput out;
  out.ticket = h.ticket;
  out.tokens.resize(size_t(h.m));
  r.get(out.tokens.data(), size_t(h.m));
  if (h.has_logprobs) {
    out.logprobs.resize(size_t(h.m));
    r.get(out.logprobs.data(), size_t(h.m));
    std::vector<int32_t> counts(size_t(h.m));
    r.get(counts.data(), counts.size());
    out.top_logprobs.resize(size_t(h.m));
    for (size_t i = 0; i < counts.size(); ++i) {
      check_count(counts[i], vocab, "alternatives");
      out.top_logprobs[i].resize(size_t(counts[i]));
      r.get(out.top_logprobs[i].data(), size_t(counts[i]));
    }
  }
  if (h.has_drafts) {
    out.drafts.resize(size_t(h.m));
    r.get(out.drafts.data(), size_t(h.m));
  }
  if (h.has_logits) {
    out.logits.resize(size_t(h.m * vocab));
    r.get(out.logits.data(), out.logits.size());
  }
  r.done();
  return out;
}

std::vector<std::byte> encode_head_part(const HeadPart& p, int64_t hidden) {
  if (p.h.size() != size_t(p.m * hidden) || p.logits.size() != size_t(p.m * p.cols))
    throw Error("encode_head_part: rows do not match");
  const int64_t header[3] = {int64_t(p.ticket), p.m, p.cols};
  Writer w(sizeof header + (p.h.size() + p.logits.size()) * 4);
  w.put(header, 3);
  w.put(p.h.data(), p.h.size());
  w.put(p.logits.data(), p.logits.size());
  return w.take();
}

HeadPart decode_head_part(std::span<const std::byte> bytes, int64_t hidden, int64_t cols) {
  Reader r(bytes, "head part");
  int64_t header[3];
  r.get(header, 3);
  HeadPart p;
  p.ticket = uint64_t(header[0]);
  p.m = header[1];
  p.cols = header[2];
  check_count(p.m, int64_t(bytes.size()), "head part rows");
  if (p.cols != cols) throw Error("malformed head part message: " + std::to_string(p.cols) + " columns, expected " +
                                  std::to_string(cols));
  // Sized before anything is allocated: a bad count is an error, not a huge vector.
  if (int64_t(bytes.size()) != int64_t(sizeof header) + p.m * (hidden + cols) * 4)
    throw Error("malformed head part message: " + std::to_string(bytes.size()) + " bytes for " + std::to_string(p.m) +
                " rows");
  p.h.resize(size_t(p.m * hidden));
  p.logits.resize(size_t(p.m * cols));
  r.get(p.h.data(), p.h.size());
  r.get(p.logits.data(), p.logits.size());
  r.done();
  return p;
}

}  // namespace trillion

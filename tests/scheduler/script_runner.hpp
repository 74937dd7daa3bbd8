// Test helpers: the real DeepSeek-V3 tokenizer's text stream and a fake
// model that "generates" a scripted token stream per request.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "parallel/step_runner.hpp"
#include "scheduler/stop_strings.hpp"
#include "tokenizer/tokenizer.hpp"

namespace trillion::test {

inline const Tokenizer& deepseek() {
  static const Tokenizer t = load_tokenizer(std::string(TRILLION_FIXTURES) + "/tokenizers/deepseek-v3");
  return t;
}

class Stream : public TokenTextStream {
 public:
  Stream() : d_(deepseek(), /*skip_special=*/true) {}
  std::string push(int32_t id) override { return d_.push(id); }
  std::string flush() override { return d_.flush(); }

 private:
  StreamDecoder d_;
};

// A fake model that generates a scripted token stream: the request whose
// prompt starts with token k gets script k, one token per position after its prompt.
class ScriptRunner : public StepRunner {
 public:
  explicit ScriptRunner(std::vector<std::vector<int32_t>> scripts) : scripts_(std::move(scripts)), first_(8) {}
  int64_t vocab_size() const override { return deepseek().vocab_size(); }
  int32_t slots() const override { return 8; }
  int32_t max_len() const override { return 256; }
  void submit(uint64_t ticket, const StepInput& in) override {
    StepOutput out;
    out.ticket = ticket;
    for (int64_t i = 0; i < in.batch.size(); ++i)
      if (in.batch.rows[size_t(i)].pos == 0) first_[size_t(in.batch.rows[size_t(i)].slot)] = in.tokens[size_t(i)];
    for (const int64_t& i : in.logit_rows) {
      const TokenRow r = in.batch.rows[size_t(i)];
      const auto& script = scripts_.at(size_t(first_[size_t(r.slot)]));
      const size_t k = size_t(r.pos + 1 - prompt_len);
      out.tokens.push_back(k < script.size() ? script[k] : script.back());
      const size_t j = size_t(&i - in.logit_rows.data());
      if (j < in.sampling.size()) mask_eos[{first_[size_t(r.slot)], int(k)}] = in.sampling[j].mask_eos;
    }
    queue_.push_back(out);
  }
  StepOutput next() override {
    StepOutput o = queue_.front();
    queue_.erase(queue_.begin());
    return o;
  }
  static constexpr int prompt_len = 2;
  std::map<std::pair<int, int>, int> mask_eos;  // (script, generated count) -> the row's SamplingParams::mask_eos

 private:
  std::vector<std::vector<int32_t>> scripts_;
  std::vector<int32_t> first_;
  std::vector<StepOutput> queue_;
};

}  // namespace trillion::test

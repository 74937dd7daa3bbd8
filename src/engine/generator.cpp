#include "engine/generator.hpp"

#include <algorithm>
#include <chrono>
#include <deque>

#include "engine/greedy.hpp"

namespace trillion {

namespace {

struct Sequence {
  const GenerateRequest* req = nullptr;
  int32_t slot = 0;
  std::vector<int32_t> tokens;  // prompt then generated
  int64_t cached = 0;           // positions already in the KV cache
  std::vector<int32_t> generated;
  bool prefilling() const { return cached < int64_t(req->prompt_token_ids.size()); }
};

}  // namespace

Generator::Generator(StepRunner& runner, const ModelConfig& cfg, GeneratorOptions opts)
    : runner_(runner), cfg_(cfg), opts_(opts) {}

void Generator::run(const std::vector<const GenerateRequest*>& requests,
                    const std::function<void(const GenerationResult&)>& done) {
  std::deque<const GenerateRequest*> pending(requests.begin(), requests.end());
  std::vector<int32_t> free_slots;
  for (int32_t s = runner_.slots() - 1; s >= 0; --s) free_slots.push_back(s);
  std::vector<Sequence> active;
  std::vector<float> logits;
  const int64_t vocab = runner_.vocab_size(), max_len = runner_.max_len();

  auto finish = [&](Sequence& s, const char* reason) {
    done(GenerationResult{s.req, s.generated, reason});
    free_slots.push_back(s.slot);
    s.req = nullptr;
  };

  while (!pending.empty() || !active.empty()) {
    // Admit requests into free slots.
    while (!pending.empty() && !free_slots.empty()) {
      const GenerateRequest* r = pending.front();
      pending.pop_front();
      Sequence s;
      s.req = r;
      s.tokens = r->prompt_token_ids;
      if (r->max_tokens == 0) {  // nothing to generate: no forward pass needed
        done(GenerationResult{r, {}, "length"});
        continue;
      }
      s.slot = free_slots.back();
      free_slots.pop_back();
      active.push_back(std::move(s));
    }
    if (active.empty()) continue;

    // Build the step: decode rows first (they always fit), then prefill chunks.
    StepInput in;
    std::vector<Sequence*> wants;     // sequences whose next token this step yields
    std::vector<Sequence*> decoders;  // sequences with one decode row this step
    bool has_prefill = false;
    for (Sequence& s : active) {
      if (s.prefilling()) continue;
      in.tokens.push_back(s.tokens.back());
      in.batch.rows.push_back({s.slot, int32_t(s.cached)});
      in.logit_rows.push_back(in.batch.size() - 1);
      wants.push_back(&s);
      decoders.push_back(&s);
    }
    int64_t budget = std::max<int64_t>(1, opts_.step_tokens);
    std::vector<std::pair<Sequence*, int64_t>> chunks;
    for (Sequence& s : active) {
      if (!s.prefilling() || budget <= 0) continue;
      const int64_t prompt = int64_t(s.req->prompt_token_ids.size());
      const int64_t take = std::min(prompt - s.cached, budget);
      budget -= take;
      has_prefill = true;
      for (int64_t p = s.cached; p < s.cached + take; ++p) {
        in.tokens.push_back(s.tokens[size_t(p)]);
        in.batch.rows.push_back({s.slot, int32_t(p)});
      }
      chunks.push_back({&s, take});
      if (s.cached + take == prompt) {  // the chunk ends the prompt: its last row yields a token
        in.logit_rows.push_back(in.batch.size() - 1);
        wants.push_back(&s);
      }
    }
    // logit_rows must be increasing: decode rows come first, prefill ends after.
    logits.resize(in.logit_rows.size() * size_t(vocab));
    const auto t0 = std::chrono::steady_clock::now();
    runner_.step(in, logits.data());
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats_.steps;
    (has_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += secs;

    for (Sequence* s : decoders) ++s->cached;
    stats_.decode_tokens += int64_t(decoders.size());
    for (auto& [s, take] : chunks) { s->cached += take; stats_.prefill_tokens += take; }

    for (size_t i = 0; i < wants.size(); ++i) {
      Sequence& s = *wants[i];
      const int32_t tok = argmax(&logits[i * size_t(vocab)], vocab);
      s.generated.push_back(tok);
      s.tokens.push_back(tok);
      const bool eos = std::find(cfg_.eos_token_ids.begin(), cfg_.eos_token_ids.end(), tok) !=
                       cfg_.eos_token_ids.end();
      if (eos) finish(s, "stop");
      else if (int64_t(s.generated.size()) >= s.req->max_tokens) finish(s, "length");
      else if (int64_t(s.tokens.size()) >= max_len) finish(s, "length");  // context full
    }
    active.erase(std::remove_if(active.begin(), active.end(),
                                [](const Sequence& s) { return s.req == nullptr; }),
                 active.end());
  }
}

}  // namespace trillion

// bench_tokenizer [MODEL_DIR_OR_FILE] [MB]: encodes ~10 MB of mixed text
// (English, code, Russian, Chinese, Japanese, Arabic, emoji, digits, built
// deterministically) and prints MB/s and tokens/s; then decodes it back.
// Default tokenizers: the DeepSeek-V3 and cl100k_base test fixtures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace {

std::string make_text(size_t bytes) {
  const char* const parts[] = {
      "The quick brown fox jumps over the lazy dog. ",
      "It's 5 o'clock; we'll see what happens next, won't we? ",
      "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n",
      "Привет, мир! Съешь же ещё этих мягких французских булок. ",
      "你好，世界！今天天气很好，我们去公园散步吧。",
      "東京は日本の首都です。カタカナとひらがな。",
      "مرحبا بالعالم. هذه جملة باللغة العربية. ",
      "Emoji 😀👍🏽 family 👨‍👩‍👧‍👦 ",
      "\t\t  \n\n",
      "{\"key\": [1, 2, 3], \"value\": 3.14159265358979}\n",
  };
  std::string text;
  uint64_t state = 12345;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const size_t pick = (state >> 33) % (sizeof parts / sizeof parts[0] + 1);
    if (pick == sizeof parts / sizeof parts[0])
      text += std::to_string(state >> 20) + " ";  // digits, words of varying frequency
    else
      text += parts[pick];
  }
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void bench(const char* name, const trillion::Tokenizer& tok, const std::string& text) {
  auto t0 = std::chrono::steady_clock::now();
  // Encode in ~4 KB documents, like a batch of prompts.
  std::vector<int32_t> ids;
  size_t tokens = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.size(), at + 4096);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    ids = tok.encode(std::string_view(text).substr(at, end - at));
    tokens += ids.size();
    at = end;
  }
  const double enc = seconds_since(t0);
  const auto all = tok.encode(text);
  t0 = std::chrono::steady_clock::now();
  const std::string back = tok.decode(all);
  const double dec = seconds_since(t0);
  const double mb = double(text.size()) / 1e6;
  std::printf("%-14s encode %6.2f MB in %.2f s: %6.2f MB/s, %5.2f M tokens/s (%zu tokens)  decode %.0f MB/s  %s\n", name,
              mb, enc, mb / enc, double(tokens) / enc / 1e6, tokens, mb / dec, back == text ? "round-trip ok" : "ROUND-TRIP MISMATCH");
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 2 ? std::atof(argv[2]) : 10.0;
  const std::string text = make_text(size_t(mb * 1e6));
  try {
    if (argc > 1) {
      bench(argv[1], trillion::load_tokenizer(argv[1]), text);
      return 0;
    }
    const std::string fx = std::string(TRILLION_FIXTURES) + "/tokenizers/";
    auto t0 = std::chrono::steady_clock::now();
    const auto ds = trillion::load_tokenizer(fx + "deepseek-v3");
    std::printf("load deepseek-v3 tokenizer.json: %.2f s\n", seconds_since(t0));
    bench("deepseek-v3", ds, text);
    // The cl100k pattern (as in the fixture's tiktoken.json).
    const std::string pat =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    t0 = std::chrono::steady_clock::now();
    const auto cl = trillion::load_tiktoken(fx + "cl100k_base/tiktoken.model", pat, {{"<|endoftext|>", 100257}});
    std::printf("load cl100k_base tiktoken.model: %.2f s\n", seconds_since(t0));
    bench("cl100k_base", cl, text);
    const auto kimi = trillion::load_tiktoken(fx + "cl100k_base/tiktoken.model", trillion::kKimiK2Pattern, {});
    bench("kimi-pattern", kimi, text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}

// A tiktoken BPE file (Kimi K2's tiktoken.model: "base64-token rank" lines),
// read by load_tokenizer as a model directory's tokenizer is, with Kimi K2's
// split pattern and special tokens; a tokenizer that loads must encode and
// decode a fixed text without crashing.
#include "fuzz_util.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("tiktoken.model", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const Tokenizer tok = load_tokenizer(path);
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok.encode("Hello, wörld! 12345 [BOS]<|im_end|>\n\tx", special);
      (void)tok.decode(ids, special);
    }
  });
  return 0;
}

// A Hugging Face tokenizer.json, read by load_hf_tokenizer; a tokenizer that
// loads must encode and decode a fixed text without crashing.
#include "fuzz_util.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("tokenizer.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const Tokenizer tok = load_hf_tokenizer(path);
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok.encode("Hello, wörld! 12345 <｜User｜>\n\tx", special);
      (void)tok.decode(ids, special);
    }
  });
  return 0;
}

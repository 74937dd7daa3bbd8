// A model directory's text: its tokenizer and chat template as the
// TextCodec (text_codec.hpp) that `generate` and `score` hand to requests/
// and scheduler/.
#pragma once
#include <string>

#include "text/text_codec.hpp"

namespace trillion {

struct TextSupport {
  TextCodec codec;         // empty callbacks for what the directory lacks; owns what it uses
  std::string note;        // what was loaded, for the log
  int32_t vocab_size = 0;  // the tokenizer's largest id + 1 (0: no tokenizer)
};

// Loads MODEL_DIR's tokenizer (tokenizer.json or tiktoken.model) and chat
// template (chat_template.jinja or tokenizer_config.json) when present.
// Plain text prompts get BOS prepended when tokenizer_config.json says
// add_bos_token (as Hugging Face's completions path does); chat prompts get
// exactly what the template renders.
TextSupport load_text_support(const std::string& model_dir);

}  // namespace trillion

// Text prompts and chat messages for `generate`: the model directory's
// tokenizer and chat template, wrapped as the request checks' PromptCodec and
// TokenDecoder callbacks (requests/ and scheduler/ depend on neither).
#pragma once
#include <memory>
#include <string>

#include "requests/request_checks.hpp"
#include "requests/result_format.hpp"
#include "scheduler/stop_strings.hpp"

namespace trillion::app {

struct TextSupport {
  PromptCodec codec;       // empty callbacks when the directory lacks the files
  TokenDecoder decode;     // ids -> text (special tokens dropped), or empty
  TextStreamFactory text_stream;  // the same text a token at a time (stop strings), or empty
  std::string note;        // what was loaded, for the log
  int32_t vocab_size = 0;  // the tokenizer's largest id + 1 (0: no tokenizer)
  std::shared_ptr<void> keep_alive;  // owns the tokenizer and template
};

// Loads MODEL_DIR's tokenizer (tokenizer.json or tiktoken.model) and chat
// template (chat_template.jinja or tokenizer_config.json) when present.
// Plain text prompts get BOS prepended when tokenizer_config.json says
// add_bos_token (as Hugging Face's completions path does); chat prompts get
// exactly what the template renders.
TextSupport load_text_support(const std::string& model_dir);

}  // namespace trillion::app

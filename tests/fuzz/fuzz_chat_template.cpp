// A chat template's source, parsed by chat::Template and rendered with one of
// two fixed conversations (plain turns; tool calls with reasoning and
// declared tools), with or without the generation prompt, as `generate`
// renders a request's messages.
#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "fuzz_util.hpp"

namespace {

using Json = nlohmann::ordered_json;

const Json& conversations() {
  static const Json c = Json::parse(R"([
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi! {{ x }}"},
                  {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Привет 👋"}],
     "extra": {"bos_token": "<s>", "eos_token": "</s>"}},
    {"messages": [{"role": "user", "name": "alice", "content": "Weather?"},
                  {"role": "assistant", "content": "", "reasoning_content": "need a tool",
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "9C"},
                  {"role": "assistant", "content": null}],
     "extra": {"bos_token": "<s>", "eos_token": "</s>",
               "tools": [{"type": "function", "function": {"name": "get_weather", "description": "now",
                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}}
  ])");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string source(fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const chat::Template tmpl(source);
    // One render per input (the size picks which), so a template at the
    // evaluator's step limit still renders well inside libFuzzer's timeout.
    const Json& c = conversations()[size % 2];
    (void)render_chat(tmpl, c["messages"], size / 2 % 2 == 1, c["extra"]);
  });
  return 0;
}

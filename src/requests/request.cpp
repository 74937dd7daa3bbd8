// Parsing one request line of either form (plain, OpenAI Batch) into a
// ScoreRequest or GenerateRequest, or a RequestError naming what is wrong.
#include "requests/request.hpp"

#include <algorithm>
#include <climits>

namespace trillion {

namespace {

using nlohmann::json;

// Throws std::string messages internally; the parse functions turn them into RequestError.
struct LineParser {
  json j;
  const json* fields = nullptr;  // the request's fields: the line itself, or the OpenAI "body"
  std::string id;
  RequestForm form = RequestForm::plain;
  bool form_known = false;

  LineParser(const JsonlLine& line, bool allow_openai) {
    try {
      j = json::parse(line.text);
    } catch (const json::exception& e) {
      // parse_error, and out_of_range for a number too large for a double
      // (1e5555...: found by fuzz_request), are both a bad line.
      throw std::string("not valid JSON: ") + e.what();
    }
    if (!j.is_object()) throw std::string("a request must be a JSON object");
    fields = &j;
    form_known = true;
    if (allow_openai && (j.contains("custom_id") || j.contains("body") || j.contains("url"))) {
      openai();
    } else {
      id = id_of("id");
    }
  }

  // {"custom_id", "method": "POST", "url", "body": {...}}
  void openai() {
    form = RequestForm::openai_completion;
    id = id_of("custom_id");
    auto url = j.find("url");
    if (url == j.end() || !url->is_string()) throw std::string("missing \"url\"");
    if (*url == "/v1/chat/completions") form = RequestForm::openai_chat;
    else if (*url != "/v1/completions")
      throw std::string("unsupported \"url\" ") + url->dump() + " (use /v1/completions or /v1/chat/completions)";
    if (auto m = j.find("method"); m != j.end() && *m != "POST")
      throw std::string("unsupported \"method\" ") + m->dump() + " (use POST)";
    auto body = j.find("body");
    if (body == j.end() || !body->is_object()) throw std::string("missing \"body\" object");
    fields = &*body;
  }

  std::string id_of(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) throw std::string("missing \"") + key + "\"";
    std::string v;
    if (it->is_string()) v = it->get<std::string>();
    else if (it->is_number_integer()) v = std::to_string(it->get<int64_t>());
    else throw std::string("\"") + key + "\" must be a string or an integer";
    if (v.empty()) throw std::string("\"") + key + "\" is empty";
    return v;
  }

  const json& f() const { return *fields; }

  std::vector<int32_t> token_list(const json& arr, const std::string& key, int64_t vocab_size, int64_t max_len) const {
    if (arr.empty()) throw "\"" + key + "\" is empty";
    if (int64_t(arr.size()) > max_len)
      throw "\"" + key + "\" has " + std::to_string(arr.size()) + " tokens, more than the context of " +
          std::to_string(max_len);
    std::vector<int32_t> out;
    out.reserve(arr.size());
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& t = arr[i];
      if (!t.is_number_integer()) throw "\"" + key + "\"[" + std::to_string(i) + "] is not an integer";
      int64_t v = t.get<int64_t>();
      if (v < 0 || v >= vocab_size)
        throw "\"" + key + "\"[" + std::to_string(i) + "] = " + std::to_string(v) +
            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
      out.push_back(int32_t(v));
    }
    return out;
  }

  std::vector<int32_t> tokens(const char* key, int64_t vocab_size, int64_t max_len) const {
    auto it = f().find(key);
    if (it == f().end()) throw std::string("missing \"") + key + "\"";
    if (!it->is_array()) throw std::string("\"") + key + "\" must be an array of token ids";
    return token_list(*it, key, vocab_size, max_len);
  }
};


double number(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw std::string("\"") + key + "\" must be a number";
  return it->get<double>();
}

int64_t integer(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) throw std::string("\"") + key + "\" must be an integer";
  return it->get<int64_t>();
}

}  // namespace

SamplingParams parse_sampling(const nlohmann::json& j, const std::string& id) {
  SamplingParams p;
  p.temperature = float(number(j, "temperature", 0.0));
  p.top_p = float(number(j, "top_p", 1.0));
  p.min_p = float(number(j, "min_p", 0.0));
  const int64_t top_k = integer(j, "top_k", 0);
  p.top_k = top_k == -1 ? 0 : int32_t(std::clamp<int64_t>(top_k, -2, INT32_MAX));  // -1: no limit (vLLM)
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (it->is_number_unsigned()) p.seed = it->get<uint64_t>();
    else if (it->is_number_integer()) p.seed = uint64_t(it->get<int64_t>());
    else throw std::string("\"seed\" must be an integer");
  } else {
    p.seed = id_hash(id);
  }
  // "logprobs": true (the chosen token's) or N (and N alternatives, as in
  // /v1/completions); "top_logprobs": N alternatives (as in /v1/chat/completions).
  if (auto it = j.find("logprobs"); it != j.end() && !it->is_null()) {
    if (it->is_boolean()) {
      p.logprobs = it->get<bool>() ? 1 : 0;
    } else if (it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= 20) {
      p.logprobs = 1;
      p.top_logprobs = int32_t(it->get<int64_t>());
    } else {
      throw std::string("\"logprobs\" must be true, false or an integer 0..20");
    }
  }
  const int64_t top = integer(j, "top_logprobs", p.top_logprobs);
  if (top < 0 || top > 20) throw std::string("\"top_logprobs\" must be an integer 0..20");
  p.top_logprobs = int32_t(top);
  if (p.top_logprobs > 0) p.logprobs = 1;
  if (std::string e = sampling_params_error(p); !e.empty()) throw e;
  return p;
}

namespace {

template <class R, class F>
Parsed<R> parse_with(const JsonlLine& line, bool allow_openai, F&& fill) {
  std::string id;
  RequestForm form = RequestForm::plain;
  bool form_known = false;
  try {
    LineParser p(line, allow_openai);
    form = p.form;
    form_known = p.form_known;
    id = p.id;
    R r;
    r.line = line.number;
    r.id = p.id;
    fill(p, r);
    return r;
  } catch (const std::string& message) {
    if (!form_known && allow_openai && line.text.find("\"custom_id\"") != std::string::npos) {
      form = RequestForm::openai_completion;  // unparsable, but evidently an OpenAI line
      form_known = true;
    }
    return RequestError{line.number, id, message, form, form_known};
  }
}

// The prompt of a generate request: "prompt_token_ids", "prompt" (text, or
// token ids as OpenAI's /v1/completions allows) or "messages".
void parse_prompt(const LineParser& p, GenerateRequest& r, int64_t vocab_size, int64_t max_len) {
  const json& f = p.f();
  const bool chat = r.form == RequestForm::openai_chat;
  const int given = int(f.contains("prompt_token_ids")) + int(f.contains("prompt")) + int(f.contains("messages"));
  if (given > 1) throw std::string("give one of \"prompt_token_ids\", \"prompt\", \"messages\"");
  if (chat) {
    if (!f.contains("messages")) throw std::string("missing \"messages\" (a /v1/chat/completions body)");
  } else if (r.form == RequestForm::openai_completion && f.contains("messages")) {
    throw std::string("\"messages\" needs \"url\": \"/v1/chat/completions\"");
  }
  if (auto it = f.find("messages"); it != f.end()) {
    if (!it->is_array() || it->empty()) throw std::string("\"messages\" must be a non-empty array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        throw "\"messages\"[" + std::to_string(i) + "] needs a \"role\"";
      if (!m.contains("content")) throw "\"messages\"[" + std::to_string(i) + "] needs a \"content\"";
    }
    r.messages = *it;
    return;
  }
  if (auto it = f.find("prompt"); it != f.end()) {
    if (it->is_string()) {
      if (it->get<std::string>().empty()) throw std::string("\"prompt\" is empty");
      r.prompt_text = it->get<std::string>();
      r.has_text = true;
    } else if (it->is_array() && (it->empty() || (*it)[0].is_number())) {
      r.prompt_token_ids = p.token_list(*it, "prompt", vocab_size, max_len);
    } else {
      throw std::string("\"prompt\" must be a string or an array of token ids (one prompt per request)");
    }
    return;
  }
  r.prompt_token_ids = p.tokens("prompt_token_ids", vocab_size, max_len);
}

}  // namespace

Parsed<ScoreRequest> parse_score_request(const JsonlLine& line, int64_t vocab_size, int64_t max_len) {
  return parse_with<ScoreRequest>(line, /*allow_openai=*/false, [&](const LineParser& p, ScoreRequest& r) {
    r.token_ids = p.tokens("token_ids", vocab_size, max_len);
  });
}

Parsed<GenerateRequest> parse_generate_request(const JsonlLine& line, int64_t vocab_size,
                                               int64_t max_len) {
  return parse_with<GenerateRequest>(line, /*allow_openai=*/true, [&](const LineParser& p, GenerateRequest& r) {
    const json& f = p.f();
    r.form = p.form;
    parse_prompt(p, r, vocab_size, max_len);
    // max_completion_tokens: the newer name in /v1/chat/completions.
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (auto it = f.find(key); it != f.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 0)
          throw std::string("\"") + key + "\" must be a non-negative integer";
        r.max_tokens = it->get<int64_t>();
      }
    }
    if (auto it = f.find("ignore_eos"); it != f.end() && !it->is_null()) {
      if (!it->is_boolean()) throw std::string("\"ignore_eos\" must be true or false");
      r.ignore_eos = it->get<bool>();
    }
    if (auto it = f.find("min_tokens"); it != f.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0)
        throw std::string("\"min_tokens\" must be a non-negative integer");
      r.min_tokens = it->get<int64_t>();
      if (r.min_tokens > r.max_tokens)
        throw "\"min_tokens\" (" + std::to_string(r.min_tokens) + ") must not exceed \"max_tokens\" (" +
            std::to_string(r.max_tokens) + ")";
    }
    // "stop": a string or an array of strings (OpenAI: at most 4).
    if (auto it = f.find("stop"); it != f.end() && !it->is_null()) {
      const char* bad = "\"stop\" must be a string or an array of strings";
      if (it->is_string()) {
        r.stop.push_back(it->get<std::string>());
      } else if (it->is_array()) {
        for (const json& s : *it) {
          if (!s.is_string()) throw std::string(bad);
          r.stop.push_back(s.get<std::string>());
        }
      } else {
        throw std::string(bad);
      }
      if (r.form != RequestForm::plain && r.stop.size() > 4)
        throw std::string("\"stop\" has ") + std::to_string(r.stop.size()) + " strings; the OpenAI form allows up to 4";
      for (const auto& s : r.stop)
        if (s.empty()) throw std::string("\"stop\" strings must not be empty");
    }
    if (auto it = f.find("model"); it != f.end() && !it->is_null()) {
      if (!it->is_string()) throw std::string("\"model\" must be a string");
      r.model = it->get<std::string>();
    }
    if (auto it = f.find("n"); it != f.end() && !it->is_null() && *it != 1)
      throw std::string("\"n\" other than 1 is not supported");
    if (auto it = f.find("stream"); it != f.end() && *it == true)
      throw std::string("\"stream\" is not supported in a batch file");
    r.sampling = parse_sampling(f, r.id);
  });
}

uint64_t id_hash(const std::string& id) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace trillion

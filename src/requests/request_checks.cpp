// The whole-file passes over parsed requests before a run: prompts through
// the tokenizer, duplicate ids, requests an earlier run already answered,
// and the error records of bad lines.
#include "requests/request_checks.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace trillion {

void tokenize_prompts(std::vector<Parsed<GenerateRequest>>& requests, const TextCodec* codec, int64_t vocab_size,
                      int64_t max_len) {
  const bool can_encode = codec && codec->encode, can_chat = can_encode && codec->render_chat;
  const bool can_decode = codec && codec->stream;
  for (auto& p : requests) {
    auto* r = std::get_if<GenerateRequest>(&p);
    if (!r) continue;
    auto fail = [&](const std::string& message) { p = RequestError{r->line, r->id, message, r->form, true}; };
    if (!r->stop.empty() && !can_decode) {
      fail("\"stop\" strings need the model's tokenizer to read the generated text, and this model directory has "
           "none (tokenizer.json or tiktoken.model)");
      continue;
    }
    if (!r->needs_tokenizer()) continue;
    const bool chat = !r->messages.is_null();
    if (!(chat ? can_chat : can_encode)) {
      fail(std::string(chat ? "chat \"messages\" need the tokenizer and chat template"
                            : "text prompts need the tokenizer") +
           " of the model, and this model directory has none (tokenizer.json or tiktoken.model" +
           (chat ? ", and a chat template)" : ")") + "; give token ids");
      continue;
    }
    try {
      if (chat) {
        r->prompt_token_ids = codec->encode(codec->render_chat(r->messages));
      } else {
        r->prompt_token_ids = codec->encode(r->prompt_text);
        if (codec->text_bos) r->prompt_token_ids.insert(r->prompt_token_ids.begin(), *codec->text_bos);
      }
    } catch (const std::exception& e) {
      fail(std::string(chat ? "cannot render the chat: " : "cannot tokenize the prompt: ") + e.what());
      continue;
    }
    if (r->prompt_token_ids.empty()) fail("the prompt encodes to no tokens");
    else if (int64_t(r->prompt_token_ids.size()) > max_len)
      fail("the prompt has " + std::to_string(r->prompt_token_ids.size()) + " tokens, more than the context of " +
           std::to_string(max_len));
    else if (std::any_of(r->prompt_token_ids.begin(), r->prompt_token_ids.end(),
                         [&](int32_t t) { return t < 0 || t >= vocab_size; }))
      fail("the tokenizer produced an id outside the model's vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
}

void settle_error_forms(std::vector<Parsed<GenerateRequest>>& requests) {
  bool known = false;
  RequestForm form = RequestForm::plain;
  for (const auto& p : requests) {
    if (const auto* r = std::get_if<GenerateRequest>(&p)) {
      form = r->form, known = true;
    } else if (const auto& e = std::get<RequestError>(p); e.form_known) {
      form = e.form, known = true;
    }
    if (known) break;
  }
  for (auto& p : requests)
    if (auto* e = std::get_if<RequestError>(&p); e && !e->form_known) e->form = form;
}

template <class R>
std::string first_error(const std::vector<Parsed<R>>& requests, const std::string& file) {
  for (const auto& p : requests)
    if (const auto* e = std::get_if<RequestError>(&p))
      return file + " line " + std::to_string(e->line) + ": " + e->message;
  return "";
}
template std::string first_error(const std::vector<Parsed<ScoreRequest>>&, const std::string&);
template std::string first_error(const std::vector<Parsed<GenerateRequest>>&, const std::string&);

namespace {
RequestForm form_of(const ScoreRequest&) { return RequestForm::plain; }
RequestForm form_of(const GenerateRequest& r) { return r.form; }
}  // namespace

template <class R>
void reject_duplicate_ids(std::vector<Parsed<R>>& requests) {
  std::unordered_set<std::string> seen;
  for (auto& p : requests) {
    if (auto* r = std::get_if<R>(&p)) {
      if (!seen.insert(r->id).second)
        p = RequestError{r->line, r->id, "duplicate id \"" + r->id + "\" (ids must be unique)", form_of(*r), true};
    }
  }
}
template void reject_duplicate_ids(std::vector<Parsed<ScoreRequest>>&);
template void reject_duplicate_ids(std::vector<Parsed<GenerateRequest>>&);

template <class R>
int64_t drop_finished(std::vector<Parsed<R>>& requests, const FinishedResults& finished) {
  const size_t before = requests.size();
  std::erase_if(requests, [&](const Parsed<R>& p) {
    if (const auto* e = std::get_if<RequestError>(&p)) return finished.error_lines.count(e->line) > 0;
    const R& r = std::get<R>(p);
    return finished.has(r.id, r.line);
  });
  return int64_t(before - requests.size());
}
template int64_t drop_finished(std::vector<Parsed<ScoreRequest>>&, const FinishedResults&);
template int64_t drop_finished(std::vector<Parsed<GenerateRequest>>&, const FinishedResults&);

template <class R>
std::vector<const R*> runnable_requests(const std::vector<Parsed<R>>& parsed, JsonlWriter& out,
                                        const std::string& command, const std::string& file, int64_t* errors) {
  std::vector<const R*> runnable;
  for (const auto& p : parsed) {
    if (const auto* e = std::get_if<RequestError>(&p)) {
      std::fprintf(stderr, "%s: %s line %lld: %s\n", command.c_str(), file.c_str(), (long long)e->line,
                   e->message.c_str());
      out.write(error_record(*e));
      ++*errors;
    } else {
      runnable.push_back(&std::get<R>(p));
    }
  }
  return runnable;
}
template std::vector<const ScoreRequest*> runnable_requests(const std::vector<Parsed<ScoreRequest>>&, JsonlWriter&,
                                                            const std::string&, const std::string&, int64_t*);
template std::vector<const GenerateRequest*> runnable_requests(const std::vector<Parsed<GenerateRequest>>&,
                                                               JsonlWriter&, const std::string&, const std::string&,
                                                               int64_t*);

nlohmann::json error_record(const RequestError& e, const char* code) {
  nlohmann::json rec;
  const nlohmann::json id = e.id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.id);
  if (e.form == RequestForm::plain) {
    rec["id"] = id;
    rec["error"] = {{"line", e.line}, {"message", e.message}};
  } else {
    rec["id"] = "batch_req_line" + std::to_string(e.line);
    rec["custom_id"] = id;
    rec["response"] = nullptr;
    rec["error"] = {{"code", code}, {"message", "line " + std::to_string(e.line) + ": " + e.message},
                    {"line", e.line}};
  }
  return rec;
}

}  // namespace trillion

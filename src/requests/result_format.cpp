#include "requests/result_format.hpp"

#include <cstdio>

#include "requests/request_checks.hpp"

namespace trillion {

namespace {

using nlohmann::json;

// A stable hex tag of the request id, for the response ids (reruns agree).
std::string tag(const std::string& id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)id_hash(id));
  return buf;
}

json text_of(const ResultContext& ctx, const std::vector<int32_t>& ids) {
  return ctx.decode ? json(ctx.decode(ids)) : json(nullptr);
}

// A result's text: cut before its stop string when one ended it.
json result_text(const GenerationResult& r, const ResultContext& ctx) {
  return r.text ? json(*r.text) : text_of(ctx, r.token_ids);
}

json plain_record(const GenerationResult& r, const ResultContext& ctx) {
  const GenerateRequest& q = *r.request;
  const int64_t prompt = int64_t(q.prompt_token_ids.size()), completion = int64_t(r.token_ids.size());
  json rec = {{"id", q.id},
              {"token_ids", r.token_ids},
              {"finish_reason", r.finish_reason},
              {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}}};
  if (ctx.decode || r.text) rec["text"] = result_text(r, ctx);
  if (q.sampling.logprobs) rec["logprobs"] = r.logprobs;
  if (q.sampling.top_logprobs > 0) {
    json top = json::array();
    for (const auto& alts : r.top_logprobs) {
      json a = json::array();
      for (const TokenLogprob& t : alts) a.push_back({{"token_id", t.token}, {"logprob", t.logprob}});
      top.push_back(std::move(a));
    }
    rec["top_logprobs"] = std::move(top);
  }
  return rec;
}

// /v1/chat/completions: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
json chat_logprobs(const GenerationResult& r, const ResultContext& ctx) {
  auto entry = [&](int32_t id, float lp) {
    json e = {{"token", text_of(ctx, {id})}, {"token_id", id}, {"logprob", lp}, {"bytes", nullptr}};
    if (ctx.decode) {
      json bytes = json::array();
      for (unsigned char c : ctx.decode({id})) bytes.push_back(int(c));
      e["bytes"] = bytes;
    }
    return e;
  };
  json content = json::array();
  for (size_t i = 0; i < r.token_ids.size(); ++i) {
    json e = entry(r.token_ids[i], r.logprobs.at(i));
    json top = json::array();
    if (i < r.top_logprobs.size())
      for (const TokenLogprob& t : r.top_logprobs[i]) top.push_back(entry(t.token, t.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

// /v1/completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}
// (tokens named by their text, or by their id when there is no tokenizer).
json completion_logprobs(const GenerationResult& r, const ResultContext& ctx) {
  auto name = [&](int32_t id) { return ctx.decode ? ctx.decode({id}) : std::to_string(id); };
  json tokens = json::array(), lps = json::array(), top = json::array(), offsets = json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < r.token_ids.size(); ++i) {
    const std::string t = name(r.token_ids[i]);
    tokens.push_back(t);
    lps.push_back(r.logprobs.at(i));
    offsets.push_back(offset);
    offset += ctx.decode ? int64_t(t.size()) : 0;
    json alts = json::object();
    if (i < r.top_logprobs.size())
      for (const TokenLogprob& a : r.top_logprobs[i]) alts[name(a.token)] = a.logprob;
    top.push_back(std::move(alts));
  }
  return {{"tokens", tokens}, {"token_ids", r.token_ids}, {"token_logprobs", lps}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

json openai_record(const GenerationResult& r, const ResultContext& ctx) {
  const GenerateRequest& q = *r.request;
  const bool chat = q.form == RequestForm::openai_chat;
  const int64_t prompt = int64_t(q.prompt_token_ids.size()), completion = int64_t(r.token_ids.size());
  const bool logprobs = q.sampling.logprobs != 0;
  json choice = {{"index", 0}, {"finish_reason", r.finish_reason}, {"token_ids", r.token_ids}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", result_text(r, ctx)}};
    choice["logprobs"] = logprobs ? chat_logprobs(r, ctx) : json(nullptr);
  } else {
    choice["text"] = result_text(r, ctx);
    choice["logprobs"] = logprobs ? completion_logprobs(r, ctx) : json(nullptr);
  }
  const std::string t = tag(q.id);
  json body = {{"id", (chat ? "chatcmpl-" : "cmpl-") + t},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", ctx.created},
               {"model", q.model.empty() ? ctx.model : q.model},
               {"choices", json::array({std::move(choice)})},
               {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}}};
  return {{"id", "batch_req_" + t},
          {"custom_id", q.id},
          {"response", {{"status_code", 200}, {"request_id", "req_" + t}, {"body", std::move(body)}}},
          {"error", nullptr}};
}

}  // namespace

nlohmann::json result_record(const GenerationResult& r, const ResultContext& ctx) {
  const GenerateRequest& q = *r.request;
  if (!r.error.empty()) return error_record(RequestError{q.line, q.id, r.error, q.form, true}, "request_failed");
  return r.request->form == RequestForm::plain ? plain_record(r, ctx) : openai_record(r, ctx);
}

nlohmann::json score_record(const ScoreResult& res) {
  const ScoreRequest& r = *res.request;
  if (!res.error.empty()) return error_record(RequestError{r.line, r.id, res.error}, "request_failed");
  double total = 0;
  for (double lp : res.token_logprobs) total += lp;
  json rec = {{"id", r.id},
              {"num_tokens", r.token_ids.size()},
              {"token_logprobs", res.token_logprobs},
              {"total_logprob", total},
              {"greedy_token_ids", res.greedy_ids}};
  if (!res.unknown_positions.empty()) rec["unknown_token_positions"] = res.unknown_positions;
  return rec;
}

}  // namespace trillion

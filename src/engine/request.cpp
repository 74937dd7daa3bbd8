#include "engine/request.hpp"

#include <cstdio>
#include <unordered_set>

namespace trillion {

namespace {

using nlohmann::json;

// Throws std::string messages internally; the parse functions turn them into RequestError.
struct LineParser {
  json j;
  std::string id;

  explicit LineParser(const JsonlLine& line) {
    try {
      j = json::parse(line.text);
    } catch (const json::parse_error& e) {
      throw std::string("not valid JSON: ") + e.what();
    }
    if (!j.is_object()) throw std::string("a request must be a JSON object");
    auto it = j.find("id");
    if (it == j.end()) throw std::string("missing \"id\"");
    if (it->is_string()) {
      id = it->get<std::string>();
    } else if (it->is_number_integer()) {
      id = std::to_string(it->get<int64_t>());
    } else {
      throw std::string("\"id\" must be a string or an integer");
    }
    if (id.empty()) throw std::string("\"id\" is empty");
  }

  std::vector<int32_t> tokens(const char* key, int64_t vocab_size, int64_t max_len) const {
    auto it = j.find(key);
    if (it == j.end()) throw std::string("missing \"") + key + "\"";
    if (!it->is_array()) throw std::string("\"") + key + "\" must be an array of token ids";
    if (it->empty()) throw std::string("\"") + key + "\" is empty";
    if (int64_t(it->size()) > max_len)
      throw std::string("\"") + key + "\" has " + std::to_string(it->size()) +
          " tokens, more than the context of " + std::to_string(max_len);
    std::vector<int32_t> out;
    out.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      if (!t.is_number_integer())
        throw std::string("\"") + key + "\"[" + std::to_string(i) + "] is not an integer";
      int64_t v = t.get<int64_t>();
      if (v < 0 || v >= vocab_size)
        throw std::string("\"") + key + "\"[" + std::to_string(i) + "] = " + std::to_string(v) +
            " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
      out.push_back(int32_t(v));
    }
    return out;
  }
};

template <class R, class F>
Parsed<R> parse_with(const JsonlLine& line, F&& fill) {
  std::string id;
  try {
    LineParser p(line);
    id = p.id;
    R r;
    r.line = line.number;
    r.id = p.id;
    fill(p, r);
    return r;
  } catch (const std::string& message) {
    return RequestError{line.number, id, message};
  }
}

}  // namespace

Parsed<ScoreRequest> parse_score_request(const JsonlLine& line, int64_t vocab_size, int64_t max_len) {
  return parse_with<ScoreRequest>(line, [&](const LineParser& p, ScoreRequest& r) {
    r.token_ids = p.tokens("token_ids", vocab_size, max_len);
  });
}

Parsed<GenerateRequest> parse_generate_request(const JsonlLine& line, int64_t vocab_size,
                                               int64_t max_len) {
  return parse_with<GenerateRequest>(line, [&](const LineParser& p, GenerateRequest& r) {
    r.prompt_token_ids = p.tokens("prompt_token_ids", vocab_size, max_len);
    if (auto it = p.j.find("max_tokens"); it != p.j.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0)
        throw std::string("\"max_tokens\" must be a non-negative integer");
      r.max_tokens = it->get<int64_t>();
    }
  });
}

template <class R>
void reject_duplicate_ids(std::vector<Parsed<R>>& requests) {
  std::unordered_set<std::string> seen;
  for (auto& p : requests) {
    if (auto* r = std::get_if<R>(&p)) {
      if (!seen.insert(r->id).second)
        p = RequestError{r->line, r->id, "duplicate id \"" + r->id + "\" (ids must be unique)"};
    }
  }
}
template void reject_duplicate_ids(std::vector<Parsed<ScoreRequest>>&);
template void reject_duplicate_ids(std::vector<Parsed<GenerateRequest>>&);

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

nlohmann::json error_record(const RequestError& e) {
  nlohmann::json rec;
  rec["id"] = e.id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.id);
  rec["error"] = {{"line", e.line}, {"message", e.message}};
  return rec;
}

}  // namespace trillion

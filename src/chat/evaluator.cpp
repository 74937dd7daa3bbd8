#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "chat/builtins.hpp"
#include "chat/template.hpp"

namespace trillion::chat {
namespace {

// Jinja rejects unknown filters and tests when it compiles the template; so do we.
void check_expr(const Expr& e) {
  if (e.kind == Expr::Kind::Filter && !is_supported_filter(e.name))
    throw TemplateError("chat template " + to_string(e.pos) + ": unsupported filter '" + e.name + "'");
  if (e.kind == Expr::Kind::Test && !is_supported_test(e.name))
    throw TemplateError("chat template " + to_string(e.pos) + ": unsupported test '" + e.name + "'");
  for (const ExprPtr& c : e.children)
    if (c) check_expr(*c);
  for (const ExprPtr& c : e.kwargs) check_expr(*c);
}
void check_body(const Body& body) {
  for (const Node& n : body) {
    if (n.expr) check_expr(*n.expr);
    if (n.filter) check_expr(*n.filter);
    for (const ExprPtr& d : n.defaults)
      if (d) check_expr(*d);
    for (const Node::Branch& b : n.branches) {
      check_expr(*b.condition);
      check_body(b.body);
    }
    check_body(n.body);
    check_body(n.else_body);
  }
}

// A template comes from the model directory and runs on every request, so
// its cost is bounded whatever it says (fuzzing found a recursive macro
// overflowing the stack, nested loops running for hours and a string doubled
// in a loop exhausting memory): a render that passes these is an InputError.
constexpr int kMaxEvalDepth = 400;            // nested evaluations (expressions, macro calls)
constexpr int64_t kMaxSteps = 200'000;        // statements, loop iterations, 4 KB of strings built
constexpr size_t kMaxText = 16u << 20;        // bytes of the output or of any string built
// Longer than the steps that could iterate it (was 10M: two nested ranges
// took over 2 GB before the first step).
constexpr size_t kMaxRange = size_t(kMaxSteps);

class Renderer {
 public:
  explicit Renderer(const Json& globals) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals.items()) scopes_.back()[k] = Value(v);
  }

  void run(const Body& body) {
    for (const Node& n : body) {
      exec(n);
      if (flow_ != Flow::Normal) return;
    }
  }
  std::string take() { return std::move(out_); }

 private:
  using Scope = std::map<std::string, Value>;

  // Innermost scope first, down to the current macro's frame, then globals.
  Value lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > frame_base_;) {
      auto f = scopes_[i].find(name);
      if (f != scopes_[i].end()) return f->second;
    }
    if (frame_base_ > 0) {
      auto f = scopes_[0].find(name);
      if (f != scopes_[0].end()) return f->second;
    }
    return {};
  }

  // Counts one statement or loop iteration against kMaxSteps.
  void step(Pos pos) {
    if (++steps_ > kMaxSteps) fail_input(pos, "the template ran more than " + std::to_string(kMaxSteps) + " steps");
  }
  void check_text(const std::string& s, Pos pos) const {
    if (s.size() > kMaxText) fail_input(pos, "the template built more than " + std::to_string(kMaxText) + " bytes");
  }

  void exec(const Node& n) {
    step(n.pos);
    exec_node(n);
    check_text(out_, n.pos);
  }
  void exec_node(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Text: out_ += n.text; return;
      case Node::Kind::Output: {
        Value v = eval(*n.expr);
        try {
          out_ += to_output(v);
        } catch (const std::invalid_argument& e) {
          fail_template(n.expr->pos, e.what());
        }
        return;
      }
      case Node::Kind::If:
        for (const Node::Branch& b : n.branches) {
          if (truthy(eval(*b.condition))) {
            run(b.body);
            return;
          }
        }
        run(n.else_body);
        return;
      case Node::Kind::For: exec_for(n); return;
      case Node::Kind::Break: flow_ = Flow::Break; return;
      case Node::Kind::Continue: flow_ = Flow::Continue; return;
      case Node::Kind::Macro: {
        Value m;
        m.kind = Value::Kind::Macro;
        m.macro = &n;
        scopes_.back()[n.target] = m;
        return;
      }
      case Node::Kind::Set: {
        Value v = eval(*n.expr);
        if (n.target_attr.empty()) {
          scopes_.back()[n.target] = std::move(v);
          return;
        }
        Value ns = lookup(n.target);
        if (ns.kind != Value::Kind::Object)
          fail_input(n.pos, "cannot set attribute '" + n.target_attr + "' of '" + n.target + "', which is a " +
                                type_name(ns) + ", not a namespace");
        (*ns.object)[n.target_attr] = std::move(v);
        return;
      }
    }
  }

  void exec_for(const Node& n) {
    std::vector<Value> items = iterate(eval(*n.expr), n.expr->pos);
    if (n.filter) {
      std::vector<Value> kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        scopes_.back()[n.target] = item;
        bool keep = truthy(eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      run(n.else_body);
      return;
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      Value loop = Value::make_object();
      Value::Object& o = *loop.object;
      o["index0"] = Value(Json(i));
      o["index"] = Value(Json(i + 1));
      o["revindex0"] = Value(Json(length - 1 - i));
      o["revindex"] = Value(Json(length - i));
      o["first"] = Value(Json(i == 0));
      o["last"] = Value(Json(i == length - 1));
      o["length"] = Value(Json(length));
      if (i > 0) o["previtem"] = items[static_cast<size_t>(i - 1)];
      if (i + 1 < length) o["nextitem"] = items[static_cast<size_t>(i + 1)];
      step(n.pos);  // an empty body costs nothing else
      scopes_.emplace_back();
      scopes_.back()[n.target] = items[static_cast<size_t>(i)];
      scopes_.back()["loop"] = loop;
      run(n.body);
      scopes_.pop_back();
      const Flow flow = flow_;
      flow_ = Flow::Normal;
      if (flow == Flow::Break) break;
    }
  }

  // A macro renders its body in its own frame (parameters, then the
  // template's globals) and returns the text.
  Value call_macro(const Expr& e, const Node& m) {
    std::vector<Value> args = positional(e, 1);
    if (args.size() > m.params.size())
      fail_input(e.pos, "macro '" + m.target + "' takes " + std::to_string(m.params.size()) + " arguments");
    Scope frame;
    for (size_t i = 0; i < args.size(); ++i) frame[m.params[i]] = args[i];
    for (size_t i = 0; i < e.kwargs.size(); ++i) {
      const std::string& k = e.kwarg_names[i];
      if (std::find(m.params.begin(), m.params.end(), k) == m.params.end())
        fail_input(e.pos, "macro '" + m.target + "' has no parameter '" + k + "'");
      frame[k] = eval(*e.kwargs[i]);
    }
    const size_t saved_base = frame_base_;
    std::string saved_out = std::move(out_);
    out_.clear();
    frame_base_ = scopes_.size();
    scopes_.push_back(std::move(frame));
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (scopes_.back().count(m.params[i])) continue;
      scopes_.back()[m.params[i]] = m.defaults[i] ? eval(*m.defaults[i]) : Value();
    }
    run(m.body);
    scopes_.pop_back();
    frame_base_ = saved_base;
    std::string result = std::move(out_);
    out_ = std::move(saved_out);
    return Value(Json(std::move(result)));
  }

  // Python's slice semantics on a list or a string (by code point).
  Value slice(const Expr& e) {
    Value obj = eval(*e.children[0]);
    if (obj.is_undefined()) fail_input(e.pos, "slice of an undefined value");
    int64_t bound[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.children[static_cast<size_t>(k + 1)]) continue;
      Value v = eval(*e.children[static_cast<size_t>(k + 1)]);
      if (v.is_none()) continue;
      if (!is_int(v)) fail_input(e.pos, "slice indices must be integers, not " + type_name(v));
      bound[k] = v.data.get<int64_t>();
      given[k] = true;
    }
    const int64_t step = bound[2];
    if (step == 0) fail_input(e.pos, "slice step cannot be zero");
    std::vector<Json> items;
    const bool is_str = obj.is_string();
    if (is_str) {
      for (std::string& c : utf8_chars(obj.data.get<std::string>())) items.emplace_back(std::move(c));
    } else if (obj.is_data() && obj.data.is_array()) {
      items.assign(obj.data.begin(), obj.data.end());
    } else {
      return {};
    }
    const int64_t n = static_cast<int64_t>(items.size());
    auto clamp = [&](int64_t i, int64_t lo, int64_t hi) {
      if (i < 0) i += n;
      return std::clamp(i, lo, hi);
    };
    int64_t start = given[0] ? (step > 0 ? clamp(bound[0], 0, n) : clamp(bound[0], -1, n - 1)) : (step > 0 ? 0 : n - 1);
    int64_t stop = given[1] ? (step > 0 ? clamp(bound[1], 0, n) : clamp(bound[1], -1, n - 1)) : (step > 0 ? n : -1);
    std::string text;
    Json arr = Json::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (is_str) text += items[static_cast<size_t>(i)].get<std::string>();
      else arr.push_back(items[static_cast<size_t>(i)]);
    }
    return is_str ? Value(Json(text)) : Value(std::move(arr));
  }

  // Every evaluation is bounded in depth (kMaxEvalDepth): the recursion of a
  // macro calling itself, and of expressions nested in macro bodies.
  Value eval(const Expr& e) {
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{++eval_depth_};
    if (eval_depth_ > kMaxEvalDepth)
      fail_input(e.pos, "the template nests deeper than " + std::to_string(kMaxEvalDepth) + " (a recursive macro?)");
    Value v = eval_expr(e);
    if (v.kind == Value::Kind::Data && v.data.is_string()) {  // a string value is a copy: its bytes cost steps
      const std::string& text = v.data.get_ref<const std::string&>();
      steps_ += int64_t(text.size() >> 12);
      check_text(text, e.pos);
    }
    return v;
  }
  Value eval_expr(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return Value(e.literal);
      case Expr::Kind::List: {
        Json arr = Json::array();
        for (const ExprPtr& c : e.children) arr.push_back(as_json(eval(*c), c->pos));
        return Value(std::move(arr));
      }
      case Expr::Kind::Dict: {
        Json obj = Json::object();
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = eval(*e.children[i]);
          if (!k.is_string()) fail_template(e.children[i]->pos, "dict keys must be strings");
          obj[k.data.get<std::string>()] = as_json(eval(*e.children[i + 1]), e.children[i + 1]->pos);
        }
        return Value(std::move(obj));
      }
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::Attr: return get_attr(eval(*e.children[0]), e.name, e.pos);
      case Expr::Kind::Item: return get_item(eval(*e.children[0]), eval(*e.children[1]), e.pos);
      case Expr::Kind::Slice: return slice(e);
      case Expr::Kind::Call: return call(e);
      case Expr::Kind::Filter: return filter(e);
      case Expr::Kind::Test: return Value(Json(test(e) != e.negated));
      case Expr::Kind::Not: return Value(Json(!truthy(eval(*e.children[0]))));
      case Expr::Kind::Neg: {
        Value v = eval(*e.children[0]);
        if (is_int(v)) {
          // -INT64_MIN does not exist (found by fuzzing: UBSan's signed overflow).
          if (v.data.get<int64_t>() == INT64_MIN) fail_input(e.pos, "integer overflow in '-'");
          return Value(Json(-v.data.get<int64_t>()));
        }
        if (is_number(v)) return Value(Json(-v.data.get<double>()));
        fail_input(e.pos, "cannot negate a " + type_name(v));
      }
      case Expr::Kind::And: {
        Value l = eval(*e.children[0]);
        return truthy(l) ? eval(*e.children[1]) : l;
      }
      case Expr::Kind::Or: {
        Value l = eval(*e.children[0]);
        return truthy(l) ? l : eval(*e.children[1]);
      }
      case Expr::Kind::Cond:
        if (truthy(eval(*e.children[1]))) return eval(*e.children[0]);
        return e.children.size() > 2 ? eval(*e.children[2]) : Value();
      case Expr::Kind::Binary: return binary(e);
    }
    fail_template(e.pos, "unknown expression");
  }

  Json as_json(const Value& v, Pos pos) {
    if (!v.is_data()) fail_input(pos, "a " + type_name(v) + " cannot be stored in a list or dict");
    return v.data;
  }

  Value get_attr(const Value& obj, const std::string& name, Pos pos) {
    if (obj.is_undefined()) fail_input(pos, "'" + name + "' of an undefined value");
    if (obj.kind == Value::Kind::Object) {
      auto f = obj.object->find(name);
      return f == obj.object->end() ? Value() : f->second;
    }
    if (obj.data.is_object()) {
      auto f = obj.data.find(name);
      if (f != obj.data.end()) return Value(*f);
    }
    return {};
  }

  Value get_item(const Value& obj, const Value& key, Pos pos) {
    if (obj.is_undefined()) fail_input(pos, "subscript of an undefined value");
    if (obj.kind == Value::Kind::Object) {
      if (!key.is_string()) return {};
      return get_attr(obj, key.data.get<std::string>(), pos);
    }
    const Json& j = obj.data;
    if (j.is_object() && key.is_string()) {
      auto f = j.find(key.data.get_ref<const std::string&>());
      if (f != j.end()) return Value(*f);
      return {};
    }
    if (j.is_array() && is_int(key)) {
      int64_t i = key.data.get<int64_t>();
      int64_t n = static_cast<int64_t>(j.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return {};
      return Value(j[static_cast<size_t>(i)]);
    }
    if (j.is_string() && is_int(key)) fail_template(pos, "unsupported: indexing into a string");
    return {};
  }

  Value filter(const Expr& e) {
    Value v = eval(*e.children[0]);
    Kwargs kwargs;
    for (size_t i = 0; i < e.kwargs.size(); ++i) kwargs.emplace_back(e.kwarg_names[i], eval(*e.kwargs[i]));
    return apply_filter(e.name, v, positional(e, 1), kwargs, e.pos);
  }

  bool test(const Expr& e) {
    if (!e.kwargs.empty() || e.children.size() > 1) fail_template(e.pos, "unsupported: arguments to test '" + e.name + "'");
    return apply_test(e.name, eval(*e.children[0]), e.pos);
  }

  Value binary(const Expr& e) {
    Value l = eval(*e.children[0]);
    return apply_binary(e.name, l, eval(*e.children[1]), e.pos);
  }

  std::vector<Value> positional(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.children.size(); ++i) args.push_back(eval(*e.children[i]));
    return args;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.children[0];
    if (callee.kind == Expr::Kind::Attr) {
      Value obj = eval(*callee.children[0]);
      if (!e.kwargs.empty()) fail_template(e.pos, "unsupported: keyword arguments to method '" + callee.name + "'");
      return call_method(obj, callee.name, positional(e, 1), e.pos);
    }
    if (callee.kind != Expr::Kind::Name) fail_template(e.pos, "unsupported call");
    Value fn = lookup(callee.name);
    if (fn.kind == Value::Kind::Macro) return call_macro(e, *fn.macro);
    std::vector<Value> args = positional(e, 1);
    if (callee.name == "namespace") {
      if (!args.empty()) fail_template(e.pos, "namespace() takes keyword arguments only");
      Value ns = Value::make_object();
      for (size_t i = 0; i < e.kwargs.size(); ++i) (*ns.object)[e.kwarg_names[i]] = eval(*e.kwargs[i]);
      return ns;
    }
    if (callee.name == "raise_exception") {
      std::string msg = args.empty() ? "" : to_output(args[0]);
      throw InputError("chat template " + to_string(e.pos) + " raised: " + msg);
    }
    if (callee.name == "range") {
      int64_t r[3] = {0, 0, 1};
      if (args.empty() || args.size() > 3) fail_input(e.pos, "range() takes 1 to 3 integers");
      for (size_t i = 0; i < args.size(); ++i) {
        if (!is_int(args[i])) fail_input(e.pos, "range() takes integers, not " + type_name(args[i]));
        r[args.size() == 1 ? 1 : i] = args[i].data.get<int64_t>();
      }
      if (r[2] == 0) fail_input(e.pos, "range() step cannot be zero");
      Json arr = Json::array();
      for (int64_t i = r[0]; r[2] > 0 ? i < r[1] : i > r[1];) {
        if (arr.size() >= kMaxRange) fail_input(e.pos, "range() longer than " + std::to_string(kMaxRange));
        arr.push_back(i);
        // Stop before i + step leaves int64 (found by fuzzing: range near INT64_MAX overflowed).
        if (__builtin_add_overflow(i, r[2], &i)) break;
      }
      return Value(std::move(arr));
    }
    if (fn.is_undefined()) fail_input(e.pos, "'" + callee.name + "' is undefined");
    fail_template(e.pos, "unsupported function '" + callee.name + "'");
  }

  enum class Flow { Normal, Break, Continue };

  std::vector<Scope> scopes_;
  size_t frame_base_ = 0;  // first scope of the running macro's frame (0: none)
  Flow flow_ = Flow::Normal;
  std::string out_;
  int eval_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Template::Template(const std::string& source) : body_(parse_template(source)) { check_body(body_); }

std::string Template::render(const Json& variables) const {
  Renderer r(variables);
  r.run(body_);
  return r.take();
}

}  // namespace trillion::chat

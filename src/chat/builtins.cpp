#include "chat/builtins.hpp"

#include <climits>
#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>

namespace trillion::chat {

void fail_input(Pos pos, const std::string& what) {
  throw InputError("chat template " + to_string(pos) + ": " + what);
}
void fail_template(Pos pos, const std::string& what) {
  throw TemplateError("chat template " + to_string(pos) + ": " + what);
}

bool is_supported_filter(const std::string& name) {
  static const std::set<std::string> s = {"tojson", "length", "count", "trim", "string", "default", "d",
                                          "first",  "last",   "join"};
  return s.count(name) != 0;
}
bool is_supported_test(const std::string& name) {
  static const std::set<std::string> s = {"defined", "undefined", "none",     "string",   "number",   "integer",
                                          "float",   "boolean",   "mapping",  "sequence", "iterable", "true",
                                          "false"};
  return s.count(name) != 0;
}

bool is_number(const Value& v) { return v.is_data() && v.data.is_number(); }
bool is_int(const Value& v) { return v.is_data() && v.data.is_number_integer(); }

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (!a.is_data() || !b.is_data()) return a.kind == b.kind && a.object == b.object && a.macro == b.macro;
  if (is_number(a) && is_number(b)) {
    if (is_int(a) && is_int(b)) return a.data.get<int64_t>() == b.data.get<int64_t>();
    return a.data.get<double>() == b.data.get<double>();
  }
  return a.data == b.data;
}

bool contains(const Value& haystack, const Value& needle, Pos pos) {
  if (haystack.is_undefined()) return false;
  if (haystack.kind == Value::Kind::Object) fail_input(pos, "'in' on a namespace");
  const Json& h = haystack.data;
  if (h.is_string()) {
    if (!needle.is_string()) fail_input(pos, "'in <string>' requires a string on the left, not a " + type_name(needle));
    return h.get_ref<const std::string&>().find(needle.data.get_ref<const std::string&>()) != std::string::npos;
  }
  if (h.is_object()) return needle.is_string() && h.contains(needle.data.get_ref<const std::string&>());
  if (h.is_array()) {
    for (const Json& x : h)
      if (equal(Value(x), needle)) return true;
    return false;
  }
  fail_input(pos, "'in' on a " + type_name(haystack));
}

std::vector<Value> iterate(const Value& v, Pos pos) {
  std::vector<Value> items;
  if (v.is_undefined()) return items;
  if (v.kind == Value::Kind::Object) fail_input(pos, "a namespace is not iterable");
  const Json& j = v.data;
  if (j.is_array()) {
    for (const Json& e : j) items.emplace_back(e);
  } else if (j.is_object()) {
    for (const auto& [k, e] : j.items()) items.emplace_back(Json(k));
  } else if (j.is_string()) {
    for (std::string& c : utf8_chars(j.get_ref<const std::string&>())) items.emplace_back(Json(std::move(c)));
  } else {
    fail_input(pos, "cannot iterate over a " + type_name(v));
  }
  return items;
}

std::string output_or_fail(const Value& v, Pos pos) {
  try {
    return to_output(v);
  } catch (const std::invalid_argument& err) {
    fail_template(pos, err.what());
  }
}

Value apply_binary(const std::string& op, const Value& l, const Value& r, Pos pos) {
  if (op == "==") return Value(Json(equal(l, r)));
  if (op == "!=") return Value(Json(!equal(l, r)));
  if (op == "in" || op == "not in") return Value(Json(contains(r, l, pos) == (op == "in")));
  if (op == "~") return Value(Json(output_or_fail(l, pos) + output_or_fail(r, pos)));
  if (l.is_undefined() || r.is_undefined())
    fail_input(pos, "an undefined value in '" + op + "' (a message lacks a field the template reads?)");
  auto mismatch = [&]() -> Value {
    fail_input(pos, "unsupported operand types for '" + op + "': " + type_name(l) + " and " + type_name(r));
  };
  if (op == "+" && l.is_string() && r.is_string())
    return Value(Json(l.data.get_ref<const std::string&>() + r.data.get_ref<const std::string&>()));
  if (op == "+" && l.is_data() && r.is_data() && l.data.is_array() && r.data.is_array()) {
    Json arr = l.data;
    for (const Json& x : r.data) arr.push_back(x);
    return Value(std::move(arr));
  }
  if (l.is_string() && r.is_string() && (op == "<" || op == ">" || op == "<=" || op == ">=")) {
    int c = l.data.get_ref<const std::string&>().compare(r.data.get_ref<const std::string&>());
    return Value(Json(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0));
  }
  if (!is_number(l) || !is_number(r)) return mismatch();
  const bool ints = is_int(l) && is_int(r);
  const double a = l.data.get<double>(), b = r.data.get<double>();
  if (op == "<") return Value(Json(a < b));
  if (op == ">") return Value(Json(a > b));
  if (op == "<=") return Value(Json(a <= b));
  if (op == ">=") return Value(Json(a >= b));
  if (ints && op != "/" && op != "**") {
    const int64_t x = l.data.get<int64_t>(), y = r.data.get<int64_t>();
    if ((op == "//" || op == "%") && y == 0) fail_input(pos, "division by zero");
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      bool overflow = op == "+" ? __builtin_add_overflow(x, y, &r)
                    : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                : __builtin_mul_overflow(x, y, &r);
      if (overflow) fail_input(pos, "integer overflow in '" + op + "'");
      return Value(Json(r));
    }
    if (x == INT64_MIN && y == -1) fail_input(pos, "integer overflow in '" + op + "'");
    int64_t q = x / y - ((x % y != 0 && ((x < 0) != (y < 0))) ? 1 : 0);  // Python floors
    if (op == "//") return Value(Json(q));
    if (op == "%") return Value(Json(x - q * y));
  }
  if (op == "+") return Value(Json(a + b));
  if (op == "-") return Value(Json(a - b));
  if (op == "*") return Value(Json(a * b));
  if (op == "**") {
    const double p = std::pow(a, b);
    if (!ints || b < 0) return Value(Json(p));
    if (!(std::fabs(p) < 9.0e15)) fail_input(pos, "integer overflow in '**'");
    return Value(Json(static_cast<int64_t>(p)));
  }
  if (b == 0) fail_input(pos, "division by zero");
  if (op == "/") return Value(Json(a / b));
  if (op == "//") return Value(Json(std::floor(a / b)));
  if (op == "%") return Value(Json(a - std::floor(a / b) * b));
  return mismatch();
}

Value apply_filter(const std::string& f, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs, Pos pos) {
  if (f == "tojson") {
    for (const auto& [name, value] : kwargs) {
      // Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
      bool default_value = name == "ensure_ascii" ? !truthy(value)
                         : name == "indent" || name == "separators" ? value.is_none()
                         : name == "sort_keys" ? !truthy(value)
                                               : false;
      if (!default_value) fail_template(pos, "unsupported: tojson(" + name + "=...)");
    }
    if (!args.empty()) fail_template(pos, "unsupported: tojson with positional arguments");
    if (!v.is_data()) fail_input(pos, "tojson of a " + type_name(v));
    return Value(Json(to_python_json(v.data)));
  }
  if (f == "default" || f == "d") {
    Value fallback = args.empty() ? Value(Json("")) : args[0];
    bool boolean = args.size() > 1 && truthy(args[1]);
    return (v.is_undefined() || (boolean && !truthy(v))) ? fallback : v;
  }
  if (!kwargs.empty()) fail_template(pos, "unsupported: keyword arguments to filter '" + f + "'");
  if (!args.empty() && f != "join") fail_template(pos, "unsupported: arguments to filter '" + f + "'");
  if (f == "length" || f == "count") {
    if (v.is_string()) return Value(Json(static_cast<int64_t>(utf8_chars(v.data.get<std::string>()).size())));
    if (v.is_data() && (v.data.is_array() || v.data.is_object())) return Value(Json(static_cast<int64_t>(v.data.size())));
    if (v.is_undefined()) return Value(Json(0));
    fail_input(pos, "length of a " + type_name(v));
  }
  if (f == "string") return Value(Json(output_or_fail(v, pos)));
  if (f == "trim") {
    std::string s = output_or_fail(v, pos);
    const char* ws = " \t\n\r\v\f";
    size_t b = s.find_first_not_of(ws);
    return Value(Json(b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(ws) + 1 - b)));
  }
  if (f == "first" || f == "last") {
    std::vector<Value> items = iterate(v, pos);
    if (items.empty()) return {};
    return f == "first" ? items.front() : items.back();
  }
  if (f == "join") {
    std::string sep = args.empty() ? "" : output_or_fail(args[0], pos);
    std::string s;
    bool first = true;
    for (const Value& item : iterate(v, pos)) {
      if (!first) s += sep;
      first = false;
      s += output_or_fail(item, pos);
    }
    return Value(Json(s));
  }
  fail_template(pos, "unsupported filter '" + f + "'");
}

bool apply_test(const std::string& t, const Value& v, Pos pos) {
  const bool data = v.is_data();
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "string") return v.is_string();
  if (t == "number") return data && v.data.is_number();
  if (t == "integer") return data && v.data.is_number_integer();
  if (t == "float") return data && v.data.is_number_float();
  if (t == "boolean") return data && v.data.is_boolean();
  if (t == "true") return data && v.data.is_boolean() && v.data.get<bool>();
  if (t == "false") return data && v.data.is_boolean() && !v.data.get<bool>();
  if (t == "mapping") return v.kind == Value::Kind::Object || (data && v.data.is_object());
  if (t == "sequence") return data && (v.data.is_array() || v.data.is_string() || v.data.is_object());
  if (t == "iterable") return v.is_undefined() || (data && (v.data.is_array() || v.data.is_string() || v.data.is_object()));
  fail_template(pos, "unsupported test '" + t + "'");
}

Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, Pos pos) {
  if (obj.is_undefined()) fail_input(pos, "'" + name + "' of an undefined value");
  if (obj.is_data() && obj.data.is_object()) {
    const Json& j = obj.data;
    if (name == "get" && (args.size() == 1 || args.size() == 2)) {
      if (args[0].is_string()) {
        auto f = j.find(args[0].data.get_ref<const std::string&>());
        if (f != j.end()) return Value(*f);
      }
      return args.size() == 2 ? args[1] : Value(Json(nullptr));
    }
    if (args.empty() && (name == "items" || name == "keys" || name == "values")) {
      Json arr = Json::array();
      for (const auto& [k, v] : j.items()) {
        if (name == "items") arr.push_back(Json::array({k, v}));
        else if (name == "keys") arr.push_back(k);
        else arr.push_back(v);
      }
      return Value(std::move(arr));
    }
  }
  if (obj.is_string()) {
    const std::string& s = obj.data.get_ref<const std::string&>();
    if (args.empty() && (name == "strip" || name == "lstrip" || name == "rstrip")) {
      const char* ws = " \t\n\r\v\f";
      size_t b = name == "rstrip" ? 0 : s.find_first_not_of(ws);
      if (b == std::string::npos) return Value(Json(""));
      size_t end = name == "lstrip" ? s.size() : s.find_last_not_of(ws) + 1;
      return Value(Json(s.substr(b, end - b)));
    }
    if (args.size() == 1 && args[0].is_string() && (name == "startswith" || name == "endswith")) {
      const std::string& a = args[0].data.get_ref<const std::string&>();
      bool r = a.size() <= s.size() &&
               (name == "startswith" ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0);
      return Value(Json(r));
    }
    if (args.size() == 1 && args[0].is_string() && name == "split") {
      const std::string& sep = args[0].data.get_ref<const std::string&>();
      if (sep.empty()) fail_input(pos, "split() with an empty separator");
      Json arr = Json::array();
      size_t start = 0;
      for (size_t f; (f = s.find(sep, start)) != std::string::npos; start = f + sep.size()) arr.push_back(s.substr(start, f - start));
      arr.push_back(s.substr(start));
      return Value(std::move(arr));
    }
  }
  fail_template(pos, "unsupported method '" + name + "' on a " + type_name(obj));
}

}  // namespace trillion::chat

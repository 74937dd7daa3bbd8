#include "chat/value.hpp"

#include <cstdio>
#include <stdexcept>

namespace trillion::chat {

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::Object:
    case Value::Kind::Macro: return true;
    case Value::Kind::Data: break;
  }
  const Json& j = v.data;
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>() != 0;
  if (j.is_number_unsigned()) return j.get<uint64_t>() != 0;
  if (j.is_number_float()) return j.get<double>() != 0.0;
  if (j.is_string()) return !j.get_ref<const std::string&>().empty();
  return !j.empty();  // array, object
}

namespace {

// Python float repr; nlohmann's shortest round-trip form matches it for the
// values chat requests carry (1.5, 100.0, 1e+20).
std::string float_repr(double d) { return Json(d).dump(); }

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out += '"';
}

void append_python_json(std::string& out, const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: out += "null"; break;
    case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; break;
    case Json::value_t::number_float: out += float_repr(j.get<double>()); break;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out += j.dump(); break;
    case Json::value_t::string: append_json_string(out, j.get_ref<const std::string&>()); break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& e : j) {
        if (!first) out += ", ";
        first = false;
        append_python_json(out, e);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : j.items()) {
        if (!first) out += ", ";
        first = false;
        append_json_string(out, k);
        out += ": ";
        append_python_json(out, e);
      }
      out += '}';
      break;
    }
    default: throw std::invalid_argument("cannot serialize binary JSON value");
  }
}

// Python's repr() of lists and dicts, for strings of printable ASCII only
// (repr escapes non-printable Unicode by tables trillion does not carry).
void append_repr(std::string& out, const Json& j, const std::string& what) {
  switch (j.type()) {
    case Json::value_t::null: out += "None"; return;
    case Json::value_t::boolean: out += j.get<bool>() ? "True" : "False"; return;
    case Json::value_t::number_float: out += float_repr(j.get<double>()); return;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out += j.dump(); return;
    case Json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      for (unsigned char c : s)
        if (c < 0x20 || c >= 0x7f)
          throw std::invalid_argument("printing a " + what +
                                      " holding a string with control or non-ASCII characters needs Python's repr "
                                      "of it; use |tojson");
      const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
      out += quote;
      for (char c : s) {
        if (c == '\\' || c == quote) out += '\\';
        out += c;
      }
      out += quote;
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        append_repr(out, j[i], what);
      }
      out += ']';
      return;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : j.items()) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, Json(k), what);
        out += ": ";
        append_repr(out, e, what);
      }
      out += '}';
      return;
    }
    default: throw std::invalid_argument("cannot print binary JSON value");
  }
}

}  // namespace

std::string to_python_json(const Json& j) {
  std::string out;
  append_python_json(out, j);
  return out;
}

std::string to_output(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.kind == Value::Kind::Object) throw std::invalid_argument("cannot print a namespace or loop object");
  if (v.kind == Value::Kind::Macro) throw std::invalid_argument("cannot print a macro (call it)");
  const Json& j = v.data;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_number_float()) return float_repr(j.get<double>());
  if (j.is_number()) return j.dump();
  std::string out;
  append_repr(out, j, type_name(v));
  return out;
}

std::string type_name(const Value& v) {
  if (v.is_undefined()) return "undefined";
  if (v.kind == Value::Kind::Object) return "namespace";
  if (v.kind == Value::Kind::Macro) return "macro";
  switch (v.data.type()) {
    case Json::value_t::null: return "none";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    case Json::value_t::number_float: return "float";
    default: return "integer";
  }
}

}  // namespace trillion::chat

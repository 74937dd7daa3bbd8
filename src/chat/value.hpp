// The values a chat template computes with: JSON data (messages, tools,
// literals; JSON null is Jinja's none), Jinja's undefined, and the mutable
// objects namespace() and the for-loop's `loop`.
#pragma once
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace trillion::chat {

struct Node;

// Keys keep their input order, as Python dicts do (tojson depends on it).
using Json = nlohmann::ordered_json;

struct Value {
  enum class Kind { Undefined, Data, Object, Macro };
  using Object = std::map<std::string, Value>;

  Kind kind = Kind::Undefined;
  Json data;                      // Kind::Data
  std::shared_ptr<Object> object; // Kind::Object: namespace() or loop, shared by reference
  const Node* macro = nullptr;    // Kind::Macro: its definition, owned by the Template

  Value() = default;
  Value(Json j) : kind(Kind::Data), data(std::move(j)) {}  // NOLINT: implicit by design
  static Value make_object() {
    Value v;
    v.kind = Kind::Object;
    v.object = std::make_shared<Object>();
    return v;
  }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_data() const { return kind == Kind::Data; }
  bool is_none() const { return is_data() && data.is_null(); }
  bool is_string() const { return is_data() && data.is_string(); }
};

// Python truthiness: undefined, none, false, 0, "", [] and {} are false.
bool truthy(const Value& v);

// Jinja's str(): what {{ v }} prints (lists and dicts as Python's repr).
// Throws std::invalid_argument on values whose repr trillion does not
// reproduce: namespaces, macros, and strings inside lists or dicts holding
// control or non-ASCII characters.
std::string to_output(const Value& v);

// Python's json.dumps(v, ensure_ascii=False) with default separators, as the
// tojson filter of Hugging Face's chat-template environment produces it.
std::string to_python_json(const Json& j);

// A short description of a value's type for error messages ("string", "none").
std::string type_name(const Value& v);

}  // namespace trillion::chat

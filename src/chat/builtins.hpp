// Jinja2's operations on values, with Python's semantics: operators,
// filters, tests, string and dict methods, iteration. Errors name `pos`:
// InputError when the values are wrong (the messages), TemplateError when
// the template asks for something trillion does not support.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "chat/lexer.hpp"
#include "chat/value.hpp"

namespace trillion::chat {

using Kwargs = std::vector<std::pair<std::string, Value>>;

[[noreturn]] void fail_input(Pos pos, const std::string& what);
[[noreturn]] void fail_template(Pos pos, const std::string& what);

bool is_supported_filter(const std::string& name);
bool is_supported_test(const std::string& name);

bool is_number(const Value& v);
bool is_int(const Value& v);
std::vector<std::string> utf8_chars(const std::string& s);  // one entry per code point

bool equal(const Value& a, const Value& b);                            // ==
bool contains(const Value& haystack, const Value& needle, Pos pos);    // needle in haystack
std::vector<Value> iterate(const Value& v, Pos pos);                   // for x in v
std::string output_or_fail(const Value& v, Pos pos);                   // {{ v }}
Value apply_binary(const std::string& op, const Value& l, const Value& r, Pos pos);  // + - * / // % ** ~ == != < > <= >= in
Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs, Pos pos);
bool apply_test(const std::string& name, const Value& v, Pos pos);
Value call_method(const Value& obj, const std::string& name, const std::vector<Value>& args, Pos pos);

}  // namespace trillion::chat

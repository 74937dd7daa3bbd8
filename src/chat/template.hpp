// A chat template: a Jinja2 subset interpreter that renders exactly what
// Hugging Face's environment renders (trim_blocks, lstrip_blocks, tojson
// without HTML escaping, raise_exception) for the constructs the DeepSeek-V3
// and Kimi K2 templates use:
//   {% if/elif/else %}, {% for x in xs [if cond] %} with loop.index/index0/
//   first/last/length/revindex/revindex0/previtem/nextitem, {% break %},
//   {% continue %}, {% set x = e %}, {% set ns.a = e %}, {% macro m(a, b=e) %}
//   (called with positional or keyword arguments; it sees its parameters and
//   the template's globals), namespace(...), raise_exception(msg),
//   range([start,] stop[, step]), literals, subscripts, slices and attributes, + - * / // % ** ~, comparisons, in / not in, and/or/not,
//   `a if c else b`, the tests defined/undefined/none/string/number/integer/
//   float/boolean/mapping/sequence/iterable/true/false, the filters tojson/
//   length/count/trim/string/default/first/last/join, and the
//   methods get/items/keys/values (dicts) and strip/lstrip/rstrip/startswith/
//   endswith/split (strings).
// Anything else is a TemplateError naming its line and column; a template
// that fails on the given messages (raise_exception, undefined values, wrong
// types) is an InputError with the position.
#pragma once
#include <string>

#include "chat/ast.hpp"

namespace trillion::chat {

class Template {
 public:
  // Parses and checks the template; throws TemplateError.
  explicit Template(const std::string& source);

  // Renders with `variables` (a JSON object) as the template's globals.
  std::string render(const Json& variables) const;

 private:
  Body body_;
};

}  // namespace trillion::chat

// The parsed form of a chat template: statements (text, output, if, for,
// set, macro, break, continue) holding expressions.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "chat/lexer.hpp"
#include "chat/value.hpp"

namespace trillion::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // literal
    List,     // children: elements
    Dict,     // children: key, value, key, value...
    Name,     // name
    Attr,     // children[0].name
    Item,     // children[0][children[1]]
    Slice,    // children[0][children[1]:children[2]:children[3]], absent parts null
    Call,     // children[0](children[1..], kwargs)
    Filter,   // children[0] | name(children[1..], kwargs)
    Test,     // children[0] is [not] name(children[1..])
    Not,      // not children[0]
    Neg,      // -children[0]
    Binary,   // children[0] name children[1]: + - * / // % ** ~ == != < > <= >= in, "not in"
    And,      // children[0] and children[1]
    Or,       // children[0] or children[1]
    Cond,     // children[0] if children[1] else children[2] (absent: undefined)
  };
  Kind kind = Kind::Literal;
  Pos pos;
  Json literal;
  std::string name;
  bool negated = false;  // Test: `is not`
  std::vector<ExprPtr> children;
  std::vector<std::string> kwarg_names;
  std::vector<ExprPtr> kwargs;
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, Macro, Break, Continue };
  struct Branch {
    ExprPtr condition;
    Body body;
  };
  Kind kind = Kind::Text;
  Pos pos;
  std::string text;        // Text
  ExprPtr expr;            // Output: the value; For: the iterable; Set: the value
  ExprPtr filter;          // For: `for x in xs if filter`
  std::vector<Branch> branches;  // If: if and elif branches
  Body body;               // For: loop body
  Body else_body;          // If, For
  std::string target;      // For: loop variable; Set: variable (or namespace); Macro: name
  std::string target_attr; // Set: `set ns.attr = ...`
  std::vector<std::string> params;  // Macro: parameter names
  std::vector<ExprPtr> defaults;    // Macro: default per parameter (null: none given)
};

// Parses a template (Hugging Face's Jinja2 settings). Throws TemplateError
// naming the position of the first construct it cannot parse or support.
Body parse_template(const std::string& source);

}  // namespace trillion::chat

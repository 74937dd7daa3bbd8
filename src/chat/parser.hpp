// The recursive-descent parser behind parse_template (ast.hpp), internal to
// src/chat. Its two grammars live in two files: parser_statements.cpp (the
// tags: text, {{ }}, if, for, set, macro, break, continue) and
// parser_expressions.cpp (Jinja2's operator precedence:
// cond-expr < or < and < not < compare < + - < ~ < * / // % < ** < unary
// < primary with postfix (. [] ()) and filters / tests). This header holds
// what both use: the token cursor and the error messages.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "chat/ast.hpp"

namespace trillion::chat {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    check_tag_lengths();
    std::string ended_by;
    Body body = parse_body({}, ended_by);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(i_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }
  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    throw TemplateError("chat template " + to_string(t.pos) + ": " + what);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::End: return "end of template";
      case TokenKind::BlockEnd: return "end of tag";
      case TokenKind::VarEnd: return "'}}'";
      case TokenKind::Text: return "text";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(peek(), std::string("expected '") + op + "', found " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::Name) fail(peek(), "expected a name, found " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != TokenKind::BlockEnd) fail(peek(), "expected end of tag, found " + describe(peek()));
    next();
  }

  // The parser and the evaluator recurse over the tree, so its depth is
  // bounded before parsing (fuzzing found 2,000 '+' or '(' overflowing the
  // stack): every expression node takes at least one token, so a tag of at
  // most kMaxTagTokens tokens is at most that deep (real templates: < 40),
  // and blocks nest at most kMaxNesting deep (parse_body).
  static constexpr size_t kMaxTagTokens = 256;
  static constexpr int kMaxNesting = 64;
  void check_tag_lengths() const {
    size_t in_tag = 0;
    for (const Token& t : toks_) {
      const bool opens = t.kind == TokenKind::VarBegin || t.kind == TokenKind::BlockBegin;
      in_tag = opens || t.kind == TokenKind::Text ? 0 : in_tag + 1;
      if (in_tag > kMaxTagTokens) fail(t, "tag longer than " + std::to_string(kMaxTagTokens) + " tokens");
    }
  }

  // Statements (parser_statements.cpp).
  // Statements until one of `ends` (an endfor, else, ...) or the end of input.
  Body parse_body(std::initializer_list<const char*> ends, std::string& ended_by);
  Node parse_if(const Token& begin);
  Node parse_for(const Token& begin);
  Node parse_set(const Token& begin);
  Node parse_macro(const Token& begin);

  // Expressions (parser_expressions.cpp), loosest binding first.
  ExprPtr parse_expression();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*sub)());
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary();
  ExprPtr parse_unary_no_filter();
  ExprPtr parse_primary();
  int64_t to_int(const Token& t) const;
  void parse_call_args(Expr& e);
  ExprPtr parse_postfix(ExprPtr e);
  // obj[key] or obj[start:stop:step] with any part omitted.
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_filter_expr(ExprPtr e);

  std::vector<Token> toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;  // blocks open in parse_body
};

}  // namespace trillion::chat

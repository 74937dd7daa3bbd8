// The statement half of the chat template parser (parser.hpp): text, output
// ({{ }}) and the tags if/elif/else, for/else, set, macro, break, continue,
// each into a Node of ast.hpp. Apart from the expressions
// (parser_expressions.cpp) because the tags are a grammar of their own:
// blocks nested by their end tags, with the loop depth that break and
// continue need.
#include "chat/parser.hpp"

namespace trillion::chat {
namespace {

Node make_node(Node::Kind kind, Pos pos) {
  Node n;
  n.kind = kind;
  n.pos = pos;
  return n;
}

}  // namespace

Body Parser::parse_body(std::initializer_list<const char*> ends, std::string& ended_by) {
  struct Nesting {  // kMaxNesting (parser.hpp)
    int& n;
    ~Nesting() { --n; }
  } nesting{++nesting_};
  if (nesting_ > kMaxNesting) fail(peek(), "blocks nested deeper than " + std::to_string(kMaxNesting));
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.kind == TokenKind::End) {
      if (ends.size() != 0) fail(t, "template ended inside a block; expected '" + std::string(*ends.begin()) + "'");
      return body;
    }
    if (t.kind == TokenKind::Text) {
      Node n = make_node(Node::Kind::Text, t.pos);
      n.text = next().text;
      body.push_back(std::move(n));
      continue;
    }
    if (t.kind == TokenKind::VarBegin) {
      Node n = make_node(Node::Kind::Output, next().pos);
      n.expr = parse_expression();
      if (peek().kind != TokenKind::VarEnd) fail(peek(), "expected '}}', found " + describe(peek()));
      next();
      body.push_back(std::move(n));
      continue;
    }
    // BlockBegin
    const Token& begin = next();
    const Token& kw = peek();
    if (kw.kind != TokenKind::Name) fail(kw, "expected a tag name after '{%'");
    for (const char* e : ends) {
      if (kw.text == e) {
        next();
        ended_by = kw.text;
        return body;
      }
    }
    if (kw.text == "if") {
      body.push_back(parse_if(begin));
    } else if (kw.text == "for") {
      body.push_back(parse_for(begin));
    } else if (kw.text == "set") {
      body.push_back(parse_set(begin));
    } else if (kw.text == "macro") {
      body.push_back(parse_macro(begin));
    } else if (kw.text == "break" || kw.text == "continue") {
      if (loop_depth_ == 0) fail(kw, "'" + kw.text + "' outside a for loop");
      next();
      expect_block_end();
      body.push_back(make_node(kw.text == "break" ? Node::Kind::Break : Node::Kind::Continue, begin.pos));
    } else if (kw.text == "endif" || kw.text == "endfor" || kw.text == "elif" || kw.text == "else") {
      fail(kw, "unexpected '" + kw.text + "'");
    } else {
      fail(kw, "unsupported tag '" + kw.text + "' (trillion supports if, for, set, macro, break, continue)");
    }
  }
}

Node Parser::parse_if(const Token& begin) {
  next();  // if
  Node n = make_node(Node::Kind::If, begin.pos);
  while (true) {
    Node::Branch br;
    br.condition = parse_expression();
    expect_block_end();
    std::string ended_by;
    br.body = parse_body({"elif", "else", "endif"}, ended_by);
    n.branches.push_back(std::move(br));
    if (ended_by == "elif") continue;
    if (ended_by == "else") {
      expect_block_end();
      n.else_body = parse_body({"endif"}, ended_by);
    }
    expect_block_end();
    return n;
  }
}

Node Parser::parse_for(const Token& begin) {
  next();  // for
  Node n = make_node(Node::Kind::For, begin.pos);
  n.target = expect_name();
  if (is_op(",")) fail(peek(), "unsupported: unpacking several loop variables");
  if (!is_name("in")) fail(peek(), "expected 'in', found " + describe(peek()));
  next();
  n.expr = parse_or();
  if (is_name("if")) {
    next();
    n.filter = parse_or();
  }
  if (is_name("recursive")) fail(peek(), "unsupported: recursive loops");
  expect_block_end();
  std::string ended_by;
  ++loop_depth_;
  n.body = parse_body({"else", "endfor"}, ended_by);
  --loop_depth_;
  if (ended_by == "else") {
    expect_block_end();
    n.else_body = parse_body({"endfor"}, ended_by);
  }
  expect_block_end();
  return n;
}

Node Parser::parse_set(const Token& begin) {
  next();  // set
  Node n = make_node(Node::Kind::Set, begin.pos);
  n.target = expect_name();
  if (is_op(".")) {
    next();
    n.target_attr = expect_name();
  }
  if (is_op(",")) fail(peek(), "unsupported: unpacking in set");
  if (!is_op("=")) fail(peek(), "unsupported: block set (expected '=' after the name)");
  next();
  n.expr = parse_expression();
  expect_block_end();
  return n;
}

Node Parser::parse_macro(const Token& begin) {
  next();  // macro
  Node n = make_node(Node::Kind::Macro, begin.pos);
  n.target = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    n.params.push_back(expect_name());
    ExprPtr dflt;
    if (is_op("=")) {
      next();
      dflt = parse_expression();
    } else if (!n.defaults.empty() && n.defaults.back()) {
      fail(peek(), "parameter without default after one with a default");
    }
    n.defaults.push_back(std::move(dflt));
    if (!is_op(",")) break;
    next();
  }
  expect_op(")");
  expect_block_end();
  std::string ended_by;
  const int saved_depth = loop_depth_;
  loop_depth_ = 0;
  n.body = parse_body({"endmacro"}, ended_by);
  loop_depth_ = saved_depth;
  expect_block_end();
  return n;
}

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace trillion::chat

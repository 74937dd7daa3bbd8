// The expression half of the chat template parser (parser.hpp): one function
// per level of Jinja2's operator precedence, loosest first,
//   cond-expr < or < and < not < compare < + - < ~ < * / // % < ** < unary
//   < primary with postfix (. [] ()) and filters / tests,
// each building an Expr of ast.hpp. Apart from the statements
// (parser_statements.cpp) because it is the other grammar: the tags reach it
// only through parse_expression and parse_or.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "chat/parser.hpp"

namespace trillion::chat {
namespace {

ExprPtr make(Expr::Kind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr binary(Expr::Kind kind, const std::string& op, Pos pos, ExprPtr l, ExprPtr r) {
  ExprPtr e = make(kind, pos);
  e->name = op;
  e->children.push_back(std::move(l));
  e->children.push_back(std::move(r));
  return e;
}

}  // namespace

ExprPtr Parser::parse_expression() {
  ExprPtr e = parse_or();
  if (!is_name("if")) return e;
  Pos pos = next().pos;
  ExprPtr c = make(Expr::Kind::Cond, pos);
  c->children.push_back(std::move(e));
  c->children.push_back(parse_or());
  if (is_name("else")) {
    next();
    c->children.push_back(parse_expression());
  }
  return c;
}

ExprPtr Parser::parse_or() {
  ExprPtr l = parse_and();
  while (is_name("or")) {
    Pos pos = next().pos;
    l = binary(Expr::Kind::Or, "or", pos, std::move(l), parse_and());
  }
  return l;
}

ExprPtr Parser::parse_and() {
  ExprPtr l = parse_not();
  while (is_name("and")) {
    Pos pos = next().pos;
    l = binary(Expr::Kind::And, "and", pos, std::move(l), parse_not());
  }
  return l;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    ExprPtr e = make(Expr::Kind::Not, next().pos);
    e->children.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr l = parse_math1();
  int count = 0;
  while (true) {
    std::string op;
    const Token& t = peek();
    if (t.kind == TokenKind::Op &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
      op = t.text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && is_name("in", 1)) {
      op = "not in";
      next();
      next();
    } else {
      return l;
    }
    if (++count > 1) fail(t, "unsupported: chained comparison");
    l = binary(Expr::Kind::Binary, op, t.pos, std::move(l), parse_math1());
  }
}

ExprPtr Parser::parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*sub)()) {
  ExprPtr l = (this->*sub)();
  while (true) {
    const char* found = nullptr;
    for (const char* op : ops)
      if (is_op(op)) found = op;
    if (!found) return l;
    Pos pos = next().pos;
    l = binary(Expr::Kind::Binary, found, pos, std::move(l), (this->*sub)());
  }
}

ExprPtr Parser::parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
ExprPtr Parser::parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
ExprPtr Parser::parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
ExprPtr Parser::parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary); }

ExprPtr Parser::parse_unary() {
  ExprPtr e;
  if (is_op("-")) {
    e = make(Expr::Kind::Neg, next().pos);
    e->children.push_back(parse_unary_no_filter());
  } else if (is_op("+")) {
    next();
    e = parse_unary_no_filter();
  } else {
    e = parse_postfix(parse_primary());
  }
  return parse_filter_expr(std::move(e));
}

ExprPtr Parser::parse_unary_no_filter() {
  if (is_op("-")) {
    ExprPtr e = make(Expr::Kind::Neg, next().pos);
    e->children.push_back(parse_unary_no_filter());
    return e;
  }
  return parse_postfix(parse_primary());
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.kind) {
    case TokenKind::Name: {
      next();
      ExprPtr e = make(Expr::Kind::Literal, t.pos);
      if (t.text == "true" || t.text == "True") e->literal = true;
      else if (t.text == "false" || t.text == "False") e->literal = false;
      else if (t.text == "none" || t.text == "None") e->literal = nullptr;
      else {
        e->kind = Expr::Kind::Name;
        e->name = t.text;
      }
      return e;
    }
    case TokenKind::String: {
      ExprPtr e = make(Expr::Kind::Literal, t.pos);
      std::string s;
      while (peek().kind == TokenKind::String) s += next().text;  // adjacent literals join
      e->literal = s;
      return e;
    }
    case TokenKind::Integer: {
      ExprPtr e = make(Expr::Kind::Literal, next().pos);
      e->literal = to_int(t);
      return e;
    }
    case TokenKind::Float: {
      ExprPtr e = make(Expr::Kind::Literal, next().pos);
      try {
        e->literal = std::stod(t.text);
      } catch (const std::exception&) {
        fail(t, "number out of range");
      }
      return e;
    }
    case TokenKind::Op:
      if (t.text == "(") {
        next();
        ExprPtr e = parse_expression();
        if (is_op(",")) fail(peek(), "unsupported: tuples");
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        ExprPtr e = make(Expr::Kind::List, next().pos);
        while (!is_op("]")) {
          e->children.push_back(parse_expression());
          if (!is_op(",")) break;
          next();
        }
        expect_op("]");
        return e;
      }
      if (t.text == "{") {
        ExprPtr e = make(Expr::Kind::Dict, next().pos);
        while (!is_op("}")) {
          e->children.push_back(parse_expression());
          expect_op(":");
          e->children.push_back(parse_expression());
          if (!is_op(",")) break;
          next();
        }
        expect_op("}");
        return e;
      }
      break;
    default: break;
  }
  fail(t, "expected an expression, found " + describe(t));
}

int64_t Parser::to_int(const Token& t) const {
  try {
    return std::stoll(t.text);
  } catch (const std::exception&) {
    fail(t, "integer out of range");
  }
}

void Parser::parse_call_args(Expr& e) {
  expect_op("(");
  while (!is_op(")")) {
    if (peek().kind == TokenKind::Name && is_op("=", 1)) {
      e.kwarg_names.push_back(next().text);
      next();
      e.kwargs.push_back(parse_expression());
    } else {
      if (!e.kwargs.empty()) fail(peek(), "positional argument after keyword argument");
      e.children.push_back(parse_expression());
    }
    if (!is_op(",")) break;
    next();
  }
  expect_op(")");
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".")) {
      Pos pos = next().pos;
      const Token& t = peek();
      ExprPtr a;
      if (t.kind == TokenKind::Name) {
        a = make(Expr::Kind::Attr, pos);
        a->name = next().text;
      } else if (t.kind == TokenKind::Integer) {
        a = make(Expr::Kind::Item, pos);
        ExprPtr k = make(Expr::Kind::Literal, t.pos);
        k->literal = to_int(next());
        a->children.push_back(std::move(e));
        a->children.push_back(std::move(k));
        e = std::move(a);
        continue;
      } else {
        fail(t, "expected an attribute name after '.'");
      }
      a->children.push_back(std::move(e));
      e = std::move(a);
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      ExprPtr c = make(Expr::Kind::Call, e->pos);
      c->children.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

// obj[key] or obj[start:stop:step] with any part omitted.
ExprPtr Parser::parse_subscript(ExprPtr obj) {
  ExprPtr a = make(Expr::Kind::Item, next().pos);
  a->children.push_back(std::move(obj));
  ExprPtr first = is_op(":") ? nullptr : parse_expression();
  if (!is_op(":")) {
    a->children.push_back(std::move(first));
    expect_op("]");
    return a;
  }
  a->kind = Expr::Kind::Slice;
  a->children.push_back(std::move(first));
  for (int part = 0; part < 2; ++part) {
    if (!is_op(":")) {
      a->children.push_back(nullptr);
      continue;
    }
    next();
    a->children.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression());
  }
  expect_op("]");
  return a;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      Pos pos = next().pos;
      ExprPtr f = make(Expr::Kind::Filter, pos);
      f->name = expect_name();
      f->children.push_back(std::move(e));
      if (is_op("(")) parse_call_args(*f);
      e = std::move(f);
    } else if (is_name("is")) {
      Pos pos = next().pos;
      ExprPtr t = make(Expr::Kind::Test, pos);
      if (is_name("not")) {
        next();
        t->negated = true;
      }
      t->name = expect_name();
      t->children.push_back(std::move(e));
      if (is_op("(")) parse_call_args(*t);
      e = std::move(t);
    } else if (is_op("(")) {
      ExprPtr c = make(Expr::Kind::Call, e->pos);
      c->children.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

}  // namespace trillion::chat

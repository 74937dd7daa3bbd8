// Recursive-descent parser with Jinja2's operator precedence:
// cond-expr < or < and < not < compare < + - < ~ < * / // % < ** < unary
// < primary with postfix (. [] ()) and filters / tests.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "chat/ast.hpp"

namespace trillion::chat {
namespace {

Node make_node(Node::Kind kind, Pos pos) {
  Node n;
  n.kind = kind;
  n.pos = pos;
  return n;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
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

  // Statements until one of `ends` (an endfor, else, ...) or the end of input.
  Body parse_body(std::initializer_list<const char*> ends, std::string& ended_by) {
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

  Node parse_if(const Token& begin) {
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

  Node parse_for(const Token& begin) {
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

  Node parse_set(const Token& begin) {
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

  Node parse_macro(const Token& begin) {
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

  ExprPtr parse_expression() {
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

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      Pos pos = next().pos;
      l = binary(Expr::Kind::Or, "or", pos, std::move(l), parse_and());
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      Pos pos = next().pos;
      l = binary(Expr::Kind::And, "and", pos, std::move(l), parse_not());
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      ExprPtr e = make(Expr::Kind::Not, next().pos);
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*sub)()) {
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
  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary); }

  ExprPtr parse_unary() {
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
  ExprPtr parse_unary_no_filter() {
    if (is_op("-")) {
      ExprPtr e = make(Expr::Kind::Neg, next().pos);
      e->children.push_back(parse_unary_no_filter());
      return e;
    }
    return parse_postfix(parse_primary());
  }

  ExprPtr parse_primary() {
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

  int64_t to_int(const Token& t) const {
    try {
      return std::stoll(t.text);
    } catch (const std::exception&) {
      fail(t, "integer out of range");
    }
  }

  void parse_call_args(Expr& e) {
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

  ExprPtr parse_postfix(ExprPtr e) {
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
  ExprPtr parse_subscript(ExprPtr obj) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  std::vector<Token> toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace trillion::chat

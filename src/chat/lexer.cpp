#include "chat/lexer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace trillion::chat {

std::string to_string(Pos p) {
  return "line " + std::to_string(p.line) + ", column " + std::to_string(p.column);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void rstrip(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Jinja's newline_sequence: \r\n and \r in text and string literals become \n.
std::string normalize_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(source) {
    // keep_trailing_newline=False: one trailing newline is dropped.
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    if (!src_.empty() && src_.back() == '\r') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t start = find_tag(pos);
      std::string text = src_.substr(pos, start - pos);
      if (start == src_.size()) {
        emit_text(std::move(text), pos);
        break;
      }
      const char type = src_[start + 1];  // '{', '%' or '#'
      const char modifier = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (modifier == '-') {
        rstrip(text);
      } else if (modifier != '+' && type != '{') {
        lstrip_block(text, pos);
      }
      emit_text(std::move(text), pos);
      size_t inner = start + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (type == '#') {
        pos = end_comment(start, inner);
      } else {
        pos = lex_tag(type, start, inner);
      }
    }
    tokens_.push_back({TokenKind::End, "", pos_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  Pos pos_of(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    throw TemplateError("chat template " + to_string(pos_of(offset)) + ": " + what);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs between the line start and a block tag go.
  void lstrip_block(std::string& text, size_t text_start) const {
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    bool line_starting = text_start == 0 || src_[text_start - 1] == '\n';
    if (l_pos == 0 && !line_starting) return;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (!is_space(text[i])) return;
    text.resize(l_pos);
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back({TokenKind::Text, normalize_newlines(text), pos_of(offset)});
  }

  // After a tag: `-` eats all whitespace, trim_blocks one newline after %} and #}.
  size_t after_tag(size_t end, bool dash, bool trim_newline) const {
    if (dash) {
      while (end < src_.size() && is_space(src_[end])) ++end;
    } else if (trim_newline) {
      if (end < src_.size() && src_[end] == '\n') ++end;
      else if (end + 1 < src_.size() && src_[end] == '\r' && src_[end + 1] == '\n') end += 2;
    }
    return end;
  }

  size_t end_comment(size_t start, size_t inner) const {
    size_t close = src_.find("#}", inner);
    if (close == std::string::npos) fail(start, "comment {# is never closed");
    bool dash = close > inner && src_[close - 1] == '-';
    return after_tag(close + 2, dash, true);
  }

  size_t lex_tag(char type, size_t start, size_t i) {
    const bool block = type == '%';
    tokens_.push_back({block ? TokenKind::BlockBegin : TokenKind::VarBegin, "", pos_of(start)});
    const char close = block ? '%' : '}';
    int depth = 0;
    while (true) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size()) fail(start, block ? "tag {% is never closed" : "tag {{ is never closed");
      if (depth == 0) {
        bool dash = src_[i] == '-' && i + 2 < src_.size() && src_[i + 1] == close && src_[i + 2] == '}';
        bool plain = src_[i] == close && i + 1 < src_.size() && src_[i + 1] == '}';
        if (dash || plain) {
          tokens_.push_back({block ? TokenKind::BlockEnd : TokenKind::VarEnd, "", pos_of(i)});
          return after_tag(i + (dash ? 3 : 2), dash, block);
        }
      }
      i = lex_expression_token(i, depth);
    }
  }

  size_t lex_expression_token(size_t i, int& depth) {
    const size_t begin = i;
    const char c = src_[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
      tokens_.push_back({TokenKind::Name, src_.substr(begin, i - begin), pos_of(begin)});
      return i;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i]))) ++i;
      TokenKind kind = TokenKind::Integer;
      if (i + 1 < src_.size() && src_[i] == '.' && std::isdigit(static_cast<unsigned char>(src_[i + 1]))) {
        kind = TokenKind::Float;
        ++i;
        while (i < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i]))) ++i;
      }
      tokens_.push_back({kind, src_.substr(begin, i - begin), pos_of(begin)});
      return i;
    }
    if (c == '\'' || c == '"') return lex_string(i);
    static const char* const two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (src_.compare(i, 2, op) == 0) {
        tokens_.push_back({TokenKind::Op, op, pos_of(begin)});
        return i + 2;
      }
    }
    if (std::string("+-*/%~<>=()[]{}.,:|").find(c) == std::string::npos)
      fail(i, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    tokens_.push_back({TokenKind::Op, std::string(1, c), pos_of(begin)});
    return i + 1;
  }

  size_t lex_string(size_t i) {
    const size_t begin = i;
    const char quote = src_[i++];
    std::string value;
    while (true) {
      if (i >= src_.size()) fail(begin, "string literal is never closed");
      char c = src_[i++];
      if (c == quote) break;
      if (c != '\\') {
        if (c == '\r') {
          value += '\n';
          if (i < src_.size() && src_[i] == '\n') ++i;
          continue;
        }
        value += c;
        continue;
      }
      if (i >= src_.size()) fail(begin, "string literal is never closed");
      char e = src_[i++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;
        case 'u':
        case 'x': {
          size_t digits = e == 'u' ? 4 : 2;
          if (i + digits > src_.size()) fail(i, "truncated escape in string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            const char h = src_[i + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail(i, "bad escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          append_utf8(value, cp);
          i += digits;
          break;
        }
        default: value += '\\'; value += e;  // Python keeps unknown escapes as written
      }
    }
    tokens_.push_back({TokenKind::String, std::move(value), pos_of(begin)});
    return i;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace trillion::chat

// Jinja2 lexer for chat templates, configured as Hugging Face configures its
// environment: trim_blocks, lstrip_blocks, keep_trailing_newline=False, and
// the `-` whitespace control on {{ }}, {% %} and {# #}.
#pragma once
#include <string>
#include <vector>

#include "common/error.hpp"

namespace trillion::chat {

// A template that trillion cannot parse or does not support. The message
// names the line and column in the template.
struct TemplateError : FormatError {
  using FormatError::FormatError;
};

struct Pos {
  int line = 1;
  int column = 1;
};
std::string to_string(Pos p);  // "line 3, column 14"

enum class TokenKind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Op, End };

struct Token {
  TokenKind kind;
  std::string text;  // Text: the literal output; String: the unescaped value; Op/Name/numbers: as written
  Pos pos;
};

// The whole template as tokens; the last is TokenKind::End.
std::vector<Token> tokenize(const std::string& source);

}  // namespace trillion::chat

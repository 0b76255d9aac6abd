#pragma once
// Lexer for the chat-template language: splits a template into text and tag tokens, applying Jinja's whitespace
// control the way HF transformers configures it (trim_blocks=True, lstrip_blocks=True, plus {%- -%} {{- -}} {#- -#}
// and {%+ which keeps leading whitespace). Comments produce no tokens.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::tmpl {

struct SourcePos {
  int line = 1;
  int col = 1;
};
std::string to_string(SourcePos pos);  // "line:col"

enum class TokenType { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
  TokenType type = TokenType::eof;
  std::string text;  // text content, name, decoded string literal, or operator spelling
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

// Tokenizes `source`. Throws TemplateError("line:col: ...") on an unterminated tag, comment or string.
std::vector<Token> tokenize(std::string_view source);

}  // namespace hearth::tmpl

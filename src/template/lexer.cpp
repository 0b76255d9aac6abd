#include "template/lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "template/value.h"

namespace hearth::tmpl {

std::string to_string(SourcePos pos) {
  return std::to_string(pos.line) + ":" + std::to_string(pos.col);
}

namespace {

constexpr std::string_view kSpace = " \t\n\r\f\v";

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

void append_utf8(uint32_t cp, std::string& out) {
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

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      if (tag == src_.size()) {
        emit_text(std::move(text), tag, false, false);
        break;
      }
      const char kind = src_[tag + 1];
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool is_block_or_comment = kind != '{';
      emit_text(std::move(text), tag, marker == '-', is_block_or_comment && marker != '+');
      pos_ = tag + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      if (kind == '#') {
        lex_comment(tag);
      } else {
        lex_tag(kind, tag);
      }
    }
    tokens_.push_back(Token{TokenType::eof, "", 0, 0, pos_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos pos_at(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return SourcePos{static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1};
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    throw_error(to_string(pos_at(offset)) + ": " + message);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // Applies the previous tag's right-side and this tag's left-side whitespace control to `text`.
  void emit_text(std::string text, size_t offset, bool strip_left_all, bool lstrip_block) {
    bool line_starting = at_template_start_;
    if (trim_next_all_) {
      const size_t keep = text.find_first_not_of(kSpace);
      const size_t cut = keep == std::string::npos ? text.size() : keep;
      line_starting = cut > 0 && text[cut - 1] == '\n';
      text.erase(0, cut);
    } else if (trim_next_newline_) {
      if (text.rfind("\r\n", 0) == 0) {
        text.erase(0, 2);
        line_starting = true;
      } else if (!text.empty() && text[0] == '\n') {
        text.erase(0, 1);
        line_starting = true;
      }
    }
    if (strip_left_all) {
      const size_t last = text.find_last_not_of(kSpace);
      text.erase(last == std::string::npos ? 0 : last + 1);
    } else if (lstrip_block) {
      const size_t nl = text.rfind('\n');
      const size_t line_begin = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || line_starting) &&
          text.find_first_not_of(kSpace, line_begin) == std::string::npos) {
        text.erase(line_begin);
      }
    }
    at_template_start_ = false;
    trim_next_all_ = false;
    trim_next_newline_ = false;
    if (!text.empty()) tokens_.push_back(Token{TokenType::text, std::move(text), 0, 0, pos_at(offset)});
  }

  void lex_comment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(tag, "unterminated comment '{#'");
    trim_next_all_ = end > pos_ && src_[end - 1] == '-';
    trim_next_newline_ = !trim_next_all_;
    pos_ = end + 2;
  }

  void lex_tag(char kind, size_t tag) {
    const bool is_var = kind == '{';
    tokens_.push_back(Token{is_var ? TokenType::var_begin : TokenType::block_begin, "", 0, 0, pos_at(tag)});
    const std::string_view close = is_var ? "}}" : "%}";
    int brackets = 0;  // like Jinja, '}}' closes the tag only outside (), [] and {}
    while (true) {
      while (pos_ < src_.size() && kSpace.find(src_[pos_]) != std::string_view::npos) ++pos_;
      if (pos_ >= src_.size()) fail(tag, std::string("unterminated tag '{") + kind + "'");
      const bool dash = src_[pos_] == '-' || src_[pos_] == '+';
      if (brackets == 0 && src_.substr(pos_ + (dash ? 1 : 0), 2) == close) {
        tokens_.push_back(Token{is_var ? TokenType::var_end : TokenType::block_end, "", 0, 0, pos_at(pos_)});
        trim_next_all_ = dash && src_[pos_] == '-';
        trim_next_newline_ = !is_var && !dash;
        pos_ += 2 + (dash ? 1 : 0);
        return;
      }
      const char c = src_[pos_];
      brackets = std::max(0, brackets + ((c == '(' || c == '[' || c == '{')   ? 1
                                         : (c == ')' || c == ']' || c == '}') ? -1
                                                                              : 0));
      lex_expression_token();
    }
  }

  void lex_expression_token() {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (is_ident_start(c)) {
      while (pos_ < src_.size() && (is_ident_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
      tokens_.push_back(Token{TokenType::name, std::string(src_.substr(start, pos_ - start)), 0, 0, pos_at(start)});
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string();
    } else {
      static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
      for (std::string_view op : kTwo) {
        if (src_.substr(pos_, 2) == op) {
          pos_ += 2;
          tokens_.push_back(Token{TokenType::op, std::string(op), 0, 0, pos_at(start)});
          return;
        }
      }
      if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
        fail(start, std::string("unexpected character '") + c + "' in tag");
      }
      ++pos_;
      tokens_.push_back(Token{TokenType::op, std::string(1, c), 0, 0, pos_at(start)});
    }
  }

  void lex_number() {
    const size_t start = pos_;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        pos_ = p;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    Token token{is_float ? TokenType::floating : TokenType::integer, std::string(src_.substr(start, pos_ - start)), 0,
                0, pos_at(start)};
    if (is_float) {
      token.float_value = std::strtod(token.text.c_str(), nullptr);
    } else {
      auto [ptr, ec] = std::from_chars(token.text.data(), token.text.data() + token.text.size(), token.int_value);
      if (ec != std::errc()) fail(start, "integer literal out of range");
    }
    tokens_.push_back(std::move(token));
  }

  uint32_t lex_hex(size_t digits, size_t start) {
    if (pos_ + digits > src_.size()) fail(start, "truncated escape in string literal");
    uint32_t cp = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char h = src_[pos_++];
      const int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) fail(start, "bad hex escape in string literal");
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    return cp;
  }

  void lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(start, "unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '0':
          value += '\0';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'x':
          append_utf8(lex_hex(2, start), value);
          break;
        case 'u':
          append_utf8(lex_hex(4, start), value);
          break;
        case 'U':
          append_utf8(lex_hex(8, start), value);
          break;
        case '\\':
        case '\'':
        case '"':
          value += e;
          break;
        case '\n':
          break;
        default:
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back(Token{TokenType::string, std::move(value), 0, 0, pos_at(start)});
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool at_template_start_ = true;
  bool trim_next_all_ = false;
  bool trim_next_newline_ = false;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace hearth::tmpl

#include "server/api/logprobs_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

// Length of the well-formed UTF-8 character at text[i] (RFC 3629: no overlongs, no surrogates), or 0.
size_t utf8_char_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  if (c >= 0xE0 && c <= 0xEF) n = 3;
  if (c >= 0xF0 && c <= 0xF4) n = 4;
  if (n == 0 || i + n > text.size()) return 0;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

json bytes_json(const std::string& piece) {
  json bytes = json::array();
  for (char c : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

json chat_entry(const Tokenizer& tokenizer, TokenId token, float logprob) {
  const std::string piece = tokenizer.token_to_piece(token, /*render_special=*/true);
  return json{{"token", valid_utf8(piece)}, {"logprob", logprob}, {"bytes", bytes_json(piece)}};
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_char_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

json chat_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer) {
  json content = json::array();
  for (const TokenLogprobs& lp : logprobs) {
    json entry = chat_entry(tokenizer, lp.token, lp.logprob);
    json top = json::array();
    for (const TokenLogprob& t : lp.top) top.push_back(chat_entry(tokenizer, t.token, t.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs_json(std::span<const TokenLogprobs> logprobs, const Tokenizer& tokenizer,
                              int64_t& text_offset) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  json offsets = json::array();
  for (const TokenLogprobs& lp : logprobs) {
    const std::string piece = tokenizer.token_to_piece(lp.token, /*render_special=*/true);
    tokens.push_back(valid_utf8(piece));
    token_logprobs.push_back(lp.logprob);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(piece.size());
    json top = json::object();
    for (const TokenLogprob& t : lp.top) {
      const std::string text = valid_utf8(tokenizer.token_to_piece(t.token, /*render_special=*/true));
      if (!top.contains(text)) top[text] = t.logprob;
    }
    if (!top.contains(tokens.back().get<std::string>())) top[tokens.back().get<std::string>()] = lp.logprob;
    top_logprobs.push_back(std::move(top));
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

}  // namespace hearth::server

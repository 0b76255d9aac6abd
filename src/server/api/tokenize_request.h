#pragma once
// POST /tokenize (llama.cpp's shape): {"content": TEXT, "add_special": true, "parse_special": false}.

#include <string>
#include <string_view>

#include "server/api/api_error.h"

namespace hearth::server {

struct TokenizeRequest {
  std::string content;
  bool add_special = true;     // BOS (and the like) as the tokenizer adds them
  bool parse_special = false;  // special-token text in `content` becomes the special token
};

// Parses and validates a /tokenize body (parse_json_body: nesting limited while parsing). A missing or non-string
// `content`, or a non-boolean flag, is a 400 naming the field in `param`; null flags take their defaults.
[[nodiscard]] ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body);

}  // namespace hearth::server

#include "server/openai/request_fields.h"

#include <fmt/format.h>

#include <string_view>

namespace hearth::server {
namespace {

using nlohmann::json;

// A field the server refuses unless it holds a value that asks for nothing; `neutral` says which.
struct RefusedField {
  const char* name;
  bool chat;
  bool completion;
  bool (*neutral)(const json& value);
  const char* why;  // what is not implemented, and what to send instead
};

bool is_empty_string(const json& v) {
  return v.is_string() && v.get<std::string>().empty();
}
bool is_text_modality(const json& v) {
  return v == json::array({"text"});
}
bool never(const json&) {
  return false;
}

constexpr RefusedField kRefused[] = {
    {"suffix", false, true, is_empty_string, "insertion (a suffix) is not implemented"},
    {"functions", true, false, never, "the deprecated functions API is not supported; use tools"},
    {"function_call", true, false, never, "the deprecated functions API is not supported; use tools"},
    {"modalities", true, false, is_text_modality, "only text output is supported ([\"text\"])"},
    {"audio", true, false, never, "audio output is not supported"},
    {"web_search_options", true, false, never, "web search is not supported"},
};

}  // namespace

std::optional<ApiError> check_unsupported_fields(const nlohmann::json& body, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::kChat;
  for (const RefusedField& f : kRefused) {
    if (!(chat ? f.chat : f.completion)) continue;
    auto it = body.find(f.name);
    if (it == body.end() || it->is_null() || f.neutral(*it)) continue;
    return invalid_request(fmt::format("'{}' is not supported by this server: {}", f.name, f.why), f.name,
                           "unsupported_parameter");
  }
  return std::nullopt;
}

}  // namespace hearth::server

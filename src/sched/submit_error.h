#pragma once
// SubmitError: why a request was refused before it ran, as a kind the server maps to an HTTP status (a switch
// with no default, so a new kind fails to compile until it is mapped) plus a message with the numbers.

#include <fmt/format.h>

#include <string>
#include <utility>

#include "util/result.h"

namespace hearth {

enum class SubmitErrorCode {
  kEmptyPrompt,       // no prompt tokens
  kInvalidToken,      // a prompt token outside the vocabulary
  kInvalidSampling,   // temperature, top_p or top_k out of range
  kInvalidStop,       // an empty stop string, or one longer than kMaxStopBytes
  kInvalidRetention,  // a retention priority, TTL or span count out of range
  kInvalidMaxTokens,  // max_tokens < 1
  kPromptTooLong,     // the prompt alone leaves no room in the context for one generated token
  kContextExceeded,   // prompt + max_tokens beyond the context
  kExceedsKvPool,     // the prompt (+1 token) needs more KV blocks than the pool less its pins can ever give
  kOverloaded,        // the waiting queue is full: retry later
  kShuttingDown,      // the engine loop has stopped
  kNotGenerative,     // the model generates no text (an encoder: embeddings only)
};

struct SubmitError {
  SubmitErrorCode code = SubmitErrorCode::kEmptyPrompt;
  std::string message;
};

template <class T>
using SubmitResult = Result<T, SubmitError>;

template <class... Args>
[[nodiscard]] SubmitError submit_error(SubmitErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return SubmitError{code, fmt::format(format, std::forward<Args>(args)...)};
}

}  // namespace hearth

#pragma once
// Ollama's wire format (POST /api/chat, /api/generate; GET /api/tags, /api/ps, /api/version; POST /api/show):
// parsing and validating a body into the CompletionRequest every generating route runs (completion_request.h), and
// rendering Ollama's NDJSON chunks, its final object with durations in nanoseconds, its model entries and its error
// shape {"error": "..."}. Pure functions (tests/server/ollama_json_test.cpp covers them without a model).
//
// What a request may hold, and what happens to it (docs/serving.md "Ollama API" lists the same):
//   applied    model, messages (system, user, assistant with tool_calls, tool with tool_name), prompt, system, raw,
//              context, stream (default true), format ("json" or a JSON schema: the grammar path), tools,
//              think (a harmony model's reasoning; false everywhere), options.temperature, top_k, top_p, seed,
//              num_predict, stop, num_ctx, presence_penalty, frequency_penalty; cache_salt, cache_prompt (Hearth's)
//   refused    (400 naming it) images, suffix, template, logprobs, top_logprobs, image generation (width, height,
//              steps), think on a model without reasoning, options min_p, repeat_penalty, mirostat, tfs_z,
//              typical_p away from their neutral values (the engine has no such sampler stage), unknown fields
//   keep_alive  with several models, the model's keep-alive from this request on (the router applies it); with one
//               model validated only (it stays loaded, as --keep-alive)
//   accepted, no effect (documented): the
//              runtime options num_thread, num_gpu, main_gpu, num_batch, numa, low_vram, f16_kv, use_mmap,
//              use_mlock, vocab_only, logits_all, embedding_only (server-wide settings), num_keep (no context
//              shifting: a prompt over num_ctx is a 400), repeat_last_n, mirostat_tau, mirostat_eta (they only
//              tune the refused stages at their neutral values), penalize_newline (Ollama ignores it too)

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"
#include "server/api/completion_request.h"
#include "server/api/tool_calls.h"

namespace hearth::server {

// Ollama's sampling defaults (its Modelfile PARAMETER defaults), used when options leave them out.
inline constexpr float kOllamaDefaultTemperature = 0.8f;
inline constexpr int32_t kOllamaDefaultTopK = 40;
inline constexpr float kOllamaDefaultTopP = 0.9f;
// The Ollama API version /api/version reports: the one whose fields this dialect follows (clients gate features
// on it).
inline constexpr std::string_view kOllamaApiVersion = "0.12.0";

struct OllamaRequest {
  // Endpoint kChat: /api/chat's messages, or /api/generate's system + prompt as one user turn (raw: kCompletion
  // with the prompt text as it is).
  CompletionRequest chat;
  bool generate = false;           // /api/generate (answers carry "response" and "context")
  std::string model;               // as the client named it (echoed in every answer)
  std::optional<int32_t> num_ctx;  // options.num_ctx: the request's context (clamped to the model's by the route)
  std::vector<int32_t> context;    // /api/generate's context: ids of an earlier exchange, put before the prompt
  bool load_only = false;          // /api/generate without prompt (nor context): Ollama's "load the model" call
  bool think = false;              // think true (or a level): a harmony model's reasoning comes back as "thinking"
  std::optional<int64_t> keep_alive_ms;  // keep_alive (kKeepAliveForever: negative, "keep it loaded")
};

// keep_alive as milliseconds: a Go duration string ("5m", "1h30m", "300ms", "0"), a bare number of seconds (as a
// number or a string); negative (or beyond kMaxKeepAliveMs): kKeepAliveForever. nullopt: not a duration.
inline constexpr int64_t kKeepAliveForever = -1;
inline constexpr int64_t kMaxKeepAliveMs = int64_t{10} * 365 * 24 * 3600 * 1000;
[[nodiscard]] std::optional<int64_t> ollama_keep_alive_ms(const nlohmann::json& value);

// Parse (parse_json_body) and validate a body. Errors are 400s whose message names the field (options.min_p, ...).
[[nodiscard]] ApiResult<OllamaRequest> parse_ollama_chat(std::string_view body);
[[nodiscard]] ApiResult<OllamaRequest> parse_ollama_generate(std::string_view body);
// The same for bodies already parsed (nested no deeper than kMaxJsonBodyDepth).
[[nodiscard]] ApiResult<OllamaRequest> validate_ollama_chat(const nlohmann::json& body);
[[nodiscard]] ApiResult<OllamaRequest> validate_ollama_generate(const nlohmann::json& body);

// A model name as Ollama spells it ("stories260K:latest"), and back: a client's name without its ":latest" tag.
[[nodiscard]] std::string ollama_model_name(const std::string& id);
[[nodiscard]] std::string strip_latest_tag(const std::string& name);

// Ollama's timestamp: RFC 3339 in UTC with nanoseconds, "2026-12-07T12:20:00.123456789Z".
[[nodiscard]] std::string ollama_timestamp_now();

// The final object's counts and durations (nanoseconds), from a finished request's usage:
//   prompt_eval_count     prompt tokens computed (the prefix cache's reused tokens are not evaluated: a second
//                         request with the same prefix shows fewer)
//   prompt_eval_duration  admission to first token (prefill); eval_duration: first token to the end
//   total_duration        arrival to the end; load_duration: 0 (the model was loaded before the request)
// The `hearth` extension carries prompt_tokens and cached_tokens (what OpenAI's usage calls them).
[[nodiscard]] nlohmann::json ollama_stats_json(const RequestUsage& usage);

// Why the answer ended: "stop", "length" (num_predict or the context), "abort"; the answer's tool calls end with
// "stop", as Ollama does.
[[nodiscard]] const char* ollama_done_reason(FinishReason reason);

// {"function": {"name", "arguments": object}} per call (Ollama's shape: arguments are an object, not a string).
[[nodiscard]] nlohmann::json ollama_tool_calls_json(const std::vector<ToolCall>& calls);

// One streamed piece: chat {"model", "created_at", "message": {"role": "assistant", "content"}, "done": false},
// generate {"model", "created_at", "response", "done": false}. `thinking` adds message.thinking (chat) or
// thinking (generate) when not empty.
[[nodiscard]] nlohmann::json ollama_chunk_json(const OllamaRequest& request, const std::string& created_at,
                                               const std::string& text, const std::string& thinking = {});

// The answer's end: done true, done_reason and the stats; chat's message holds `text` (the whole answer when not
// streamed, else "") and the calls; generate's "response" holds `text` and "context" the exchange's ids.
struct OllamaFinal {
  std::string text;
  std::string thinking;
  std::vector<ToolCall> calls;
  FinishReason reason = FinishReason::kNone;
  RequestUsage usage;
  std::vector<int32_t> context;  // generate: prompt + answer ids
};
[[nodiscard]] nlohmann::json ollama_final_json(const OllamaRequest& request, const std::string& created_at,
                                               const OllamaFinal& final);

// One NDJSON line: the compact JSON and "\n".
[[nodiscard]] std::string ndjson_line(const nlohmann::json& payload);

// Ollama's error body: {"error": message}.
[[nodiscard]] nlohmann::json ollama_error_json(const ApiError& error);

// What /api/tags, /api/ps and /api/show say of a model.
struct OllamaModelFacts {
  std::string id;
  int64_t size_bytes = 0;  // weights (and, for /api/ps, the KV pool too)
  int32_t n_ctx = 0;
  bool loaded = true;
  double expires_in_s = -1;  // /api/ps: seconds until keep-alive unloads it; < 0: never
  ModelListing listing;      // details (family, parameter_size, quantization_level), digest and modified_at
  bool embedding = false;    // it serves /api/embed (an embedding model): /api/show's capabilities say "embedding"
  bool completion = true;    // it generates text (not an encoder): /api/show's capabilities say "completion"
};
// {"name", "model", "modified_at", "size", "digest", "details"}: one /api/tags entry.
[[nodiscard]] nlohmann::json ollama_tag_json(const OllamaModelFacts& model);
// The /api/tags entry plus "expires_at", "size_vram" (0: CPU) and "context_length": one /api/ps entry.
[[nodiscard]] nlohmann::json ollama_ps_json(const OllamaModelFacts& model);
// /api/show: details, model_info (the context length), the chat template's description, capabilities.
[[nodiscard]] nlohmann::json ollama_show_json(const OllamaModelFacts& model, const std::string& template_description,
                                              bool tools);
// The body of POST /api/show: {"model": name} (or the older "name"); returns the name.
[[nodiscard]] ApiResult<std::string> parse_ollama_show(std::string_view body);

}  // namespace hearth::server

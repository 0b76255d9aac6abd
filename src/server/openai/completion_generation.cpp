// CompletionGeneration: a completion's response, pulled by the transport as the engine delivers its choices'
// outputs (see completion_generation.h).

#include "server/openai/completion_generation.h"

#include "server/api/logprobs_json.h"

namespace hearth::server {

CompletionGeneration::CompletionGeneration(ServerContext& context, CompletionRequest request, ResponseMeta meta,
                                           std::vector<std::unique_ptr<RequestHandle>> handles)
    : Generation(context, request.stream), request_(std::move(request)), meta_(std::move(meta)) {
  HEARTH_CHECK(!handles.empty(), "a generation needs at least one choice");
  for (auto& handle : handles) {
    Choice& c = choices_.emplace_back();
    c.handle = std::move(handle);
    if (request_.echo) c.text = request_.prompt_text;
    c.text_offset = static_cast<int64_t>(c.text.size());
    c.channels = context_.channel_parser(request_);
    if (!c.channels && request_.stream && request_.tools_active()) {
      c.tools.emplace(context_.chat().tool_call_format(), request_.tool_call_forced());
    }
  }
}

void CompletionGeneration::start(std::function<void()> wake) {
  for (Choice& c : choices_) c.handle->set_notify(wake);
}

ResponseSource::Chunk CompletionGeneration::pull() {
  Chunk chunk;
  if (request_.stream && !head_sent_) {
    head_sent_ = true;
    chunk.head = sse_head();
  }
  for (size_t i = 0; i < choices_.size() && !done_; ++i) {
    if (!read_choice(i, chunk)) break;
  }
  if (!done_ && all_finished()) complete(chunk);
  chunk.done = done_;
  return chunk;
}

bool CompletionGeneration::read_choice(size_t i, Chunk& chunk) {
  Choice& c = choices_[i];
  while (!c.usage) {
    std::optional<RequestOutput> out = c.handle->try_next();
    if (!out) return true;
    if (out->error || out->runtime_error) {
      record_finish(*out, i);
      fail(i, *out, chunk);
      return false;
    }
    if (request_.stream) {
      chunk.data += stream_events(i, *out);
    } else {
      c.text += out->new_text;
      c.logprobs.insert(c.logprobs.end(), out->logprobs.begin(), out->logprobs.end());
    }
    if (out->finished) {
      record_finish(*out, i);
      c.usage = out->usage;
      c.finish_reason = out->finish_reason;
    }
  }
  return true;
}

// The SSE events for one piece of choice i's news (with its finish chunk when it is the last).
std::string CompletionGeneration::stream_events(size_t i, const RequestOutput& out) {
  Choice& c = choices_[i];
  if (c.channels) return stream_harmony(i, out);
  const auto index = static_cast<int32_t>(i);
  std::string events;
  if (c.first_chunk && request_.echo && !request_.prompt_text.empty()) {
    events += sse_event(chunk_json(request_, meta_, request_.prompt_text, true, FinishReason::kNone, nullptr, index));
    c.first_chunk = false;
  }
  const std::string text = c.tools ? c.tools->push(out.new_text) : out.new_text;
  if (!text.empty() || !out.logprobs.empty() || (c.first_chunk && !out.finished)) {
    events += sse_event(
        chunk_json(request_, meta_, text, c.first_chunk, FinishReason::kNone, logprobs_json(c, out.logprobs), index));
    c.first_chunk = false;
  }
  if (out.finished && c.tools) {
    events += stream_tool_calls(i, out);
  } else if (out.finished) {
    events += sse_event(chunk_json(request_, meta_, "", c.first_chunk, out.finish_reason, nullptr, index));
  }
  return events;
}

std::string CompletionGeneration::stream_tool_calls(size_t i, const RequestOutput& out) {
  Choice& c = choices_[i];
  const auto index = static_cast<int32_t>(i);
  ChoiceResult result =
      choice_with_tool_calls(request_, context_.chat().tool_call_format(), c.tools->held(), out.finish_reason, nullptr);
  std::string events;
  if (!result.text.empty()) {
    events += sse_event(chunk_json(request_, meta_, result.text, c.first_chunk, FinishReason::kNone, nullptr, index));
    c.first_chunk = false;
  }
  if (result.tool_calls.empty()) {
    events += sse_event(chunk_json(request_, meta_, "", c.first_chunk, out.finish_reason, nullptr, index));
    return events;
  }
  for (const nlohmann::json& chunk : tool_call_chunks_json(request_, meta_, result.tool_calls, c.first_chunk, index)) {
    events += sse_event(chunk);
  }
  c.first_chunk = false;
  events += sse_event(tool_calls_finish_chunk_json(request_, meta_, index, !result.tool_calls.front().whole));
  return events;
}

void CompletionGeneration::record_finish(RequestOutput& out, size_t choice) {
  if (out.error) return;  // refused by the engine: it never ran
  if (remember && choice == 0) context_.remember_answer(request_.cache_salt, parse_special, prompt_text, out);
  Metrics& metrics = context_.metrics();
  if (choice == 0 && meta_.answer_tokens_reused > 0) metrics.record_answer_tokens_reused(meta_.answer_tokens_reused);
  const std::string reuse_stop = out.usage.reuse.reason ? reuse_stop_name(*out.usage.reuse.reason) : "";
  if (!reuse_stop.empty()) metrics.record_reuse_stop(reuse_stop);
  metrics.record_tenant(request_.cache_salt, out.usage.prompt_tokens, out.usage.cached_tokens,
                        out.usage.completion_tokens, reuse_stop);
  context_.history().record_ttft(context_.seconds_since_start(), out.usage.ttft_ms / 1000.0);
  metrics.record_request(request_.endpoint == Endpoint::kChat ? "chat" : "completions",
                         finish_reason_text(out.finish_reason), out.usage.ttft_ms / 1000.0,
                         out.usage.total_ms / 1000.0);
}

// Refused after the stream started (the engine re-checks what submit checked), or ended by the engine (non-finite
// logits, shutdown): whatever text came first, then an error event and [DONE] instead of a finish reason; a whole
// response is the error object.
void CompletionGeneration::fail(size_t i, const RequestOutput& out, Chunk& chunk) {
  done_ = true;
  for (Choice& c : choices_) {
    if (!c.usage) c.handle->abort();
  }
  const ApiError error = out.error ? api_error(*out.error, request_.endpoint) : api_error(*out.runtime_error);
  if (!request_.stream) {
    chunk.head = context_.error_response(error);
    return;
  }
  Choice& c = choices_[i];
  const std::string text = c.channels ? c.channels->push(out.new_text).content : out.new_text;
  if (!text.empty()) {
    chunk.data += sse_event(
        chunk_json(request_, meta_, text, c.first_chunk, FinishReason::kNone, nullptr, static_cast<int32_t>(i)));
  }
  chunk.data += sse_event(error_json(error));
  chunk.data.append(kSseDone);
}

void CompletionGeneration::complete(Chunk& chunk) {
  done_ = true;
  if (request_.stream) {
    if (request_.include_usage) chunk.data += sse_event(usage_chunk_json(request_, meta_, usage()));
    chunk.data.append(kSseDone);
    return;
  }
  std::vector<ChoiceResult> results;
  for (Choice& c : choices_) {
    if (c.channels) {
      results.push_back(harmony_result(c));
      continue;
    }
    results.push_back(choice_with_tool_calls(request_, context_.chat().tool_call_format(), c.text, c.finish_reason,
                                             logprobs_json(c, c.logprobs)));
  }
  chunk.head = ServerContext::json_response(response_json(request_, meta_, results, usage()));
}

bool CompletionGeneration::all_finished() const {
  for (const Choice& c : choices_) {
    if (!c.usage) return false;
  }
  return true;
}

nlohmann::json CompletionGeneration::usage() const {
  std::vector<RequestUsage> usages;
  for (const Choice& c : choices_) usages.push_back(*c.usage);
  return usage_json(usages, request_, meta_.answer_tokens_reused);
}

nlohmann::json CompletionGeneration::logprobs_json(Choice& choice, std::span<const TokenLogprobs> logprobs) {
  if (!request_.top_logprobs) return nullptr;
  const Tokenizer& tokenizer = context_.tokenizer();
  if (request_.endpoint == Endpoint::kChat) return chat_logprobs_json(logprobs, tokenizer);
  return completion_logprobs_json(logprobs, tokenizer, choice.text_offset);
}

void CompletionGeneration::cancel() {
  context_.metrics().record_disconnect();
  if (done_) return;
  done_ = true;
  // The final outputs (aborted) come within one engine step; they are recorded like any others.
  auto self = shared_from_this();
  for (Choice& c : choices_) {
    if (c.usage) continue;
    c.handle->set_notify([self] { self->drain_after_cancel(); });
    c.handle->abort();
  }
}

void CompletionGeneration::drain_after_cancel() {
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    while (!c.usage) {
      std::optional<RequestOutput> out = c.handle->try_next();
      if (!out) break;
      if (!out->finished) continue;
      record_finish(*out, i);
      c.usage = out->usage;
    }
  }
  if (!all_finished()) return;
  for (Choice& c : choices_) c.handle->set_notify({});  // drops the references that kept this alive
}

}  // namespace hearth::server

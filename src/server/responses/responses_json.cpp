#include "server/responses/responses_json.h"

#include <fmt/format.h>

#include <random>

#include "server/openai/openai_json.h"

namespace hearth::server {

using nlohmann::json;

std::string new_item_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

nlohmann::json response_object(const ResponseHead& head, std::string_view status, nlohmann::json output,
                               nlohmann::json usage) {
  json r = {
      {"id", head.id},
      {"object", "response"},
      {"created_at", head.created_at},
      {"status", status},
      {"background", false},
      {"error", nullptr},
      {"incomplete_details", status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()},
      {"instructions", head.instructions ? json(*head.instructions) : json()},
      {"max_tool_calls", nullptr},
      {"model", head.model},
      {"output", std::move(output)},
      {"previous_response_id", head.previous_response_id.empty() ? json() : json(head.previous_response_id)},
      {"service_tier", "default"},
      {"store", head.store},
      {"top_logprobs", 0},
      {"truncation", "disabled"},
      {"usage", std::move(usage)},
  };
  for (const auto& [key, value] : head.echo.items()) r[key] = value;
  return r;
}

nlohmann::json responses_usage_json(const ResponsesUsage& u, const CompletionRequest& request) {
  json hearth = usage_json(u.usage, request, u.answer_tokens_reused)["hearth"];
  hearth["previous_response_tokens"] = u.previous_response_tokens;
  return json{
      {"input_tokens", u.usage.prompt_tokens},
      {"input_tokens_details", {{"cached_tokens", u.usage.cached_tokens}}},
      {"output_tokens", u.usage.completion_tokens},
      {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
      {"total_tokens", u.usage.prompt_tokens + u.usage.completion_tokens},
      {"hearth", std::move(hearth)},
  };
}

std::string_view response_status(FinishReason reason) {
  return reason == FinishReason::kLength ? "incomplete" : "completed";
}

std::string response_event(const nlohmann::json& payload) {
  return fmt::format("event: {}\ndata: {}\n\n", payload.value("type", std::string("error")),
                     payload.dump(-1, ' ', false, json::error_handler_t::replace));
}

void ResponseOutput::emit(json payload, std::string& events) {
  payload["sequence_number"] = sequence_++;
  events += response_event(payload);
}

void ResponseOutput::start(const nlohmann::json& in_progress, std::string& events) {
  emit({{"type", "response.created"}, {"response", in_progress}}, events);
  emit({{"type", "response.in_progress"}, {"response", in_progress}}, events);
}

// An item opens with output_item.added and, for its one content part, content_part.added (empty).
void ResponseOutput::open(Open kind, std::string& events) {
  const bool message = kind == Open::kMessage;
  json item = message ? json{{"id", new_item_id("msg_")},
                             {"type", "message"},
                             {"status", "in_progress"},
                             {"role", "assistant"},
                             {"content", json::array()}}
                      : json{{"id", new_item_id("rs_")},
                             {"type", "reasoning"},
                             {"status", "in_progress"},
                             {"summary", json::array()},
                             {"content", json::array()}};
  const json part = message ? json{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}
                            : json{{"type", "reasoning_text"}, {"text", ""}};
  const size_t index = items_.size();
  emit({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}}, events);
  emit({{"type", "response.content_part.added"},
        {"item_id", item["id"]},
        {"output_index", index},
        {"content_index", 0},
        {"part", part}},
       events);
  item["content"].push_back(part);
  items_.push_back(std::move(item));
  open_ = kind;
  open_text_.clear();
}

void ResponseOutput::text(std::string_view delta, std::string& events) {
  if (delta.empty()) return;
  if (open_ != Open::kMessage) {
    close("completed", events);
    open(Open::kMessage, events);
  }
  open_text_ += delta;
  emit({{"type", "response.output_text.delta"},
        {"item_id", items_.back()["id"]},
        {"output_index", items_.size() - 1},
        {"content_index", 0},
        {"delta", delta},
        {"logprobs", json::array()}},
       events);
}

void ResponseOutput::reasoning(std::string_view delta, std::string& events) {
  if (delta.empty()) return;
  if (open_ != Open::kReasoning) {
    close("completed", events);
    open(Open::kReasoning, events);
  }
  open_text_ += delta;
  emit({{"type", "response.reasoning_text.delta"},
        {"item_id", items_.back()["id"]},
        {"output_index", items_.size() - 1},
        {"content_index", 0},
        {"delta", delta}},
       events);
}

// The open item's text is whole: its done events, and the item in its final state.
void ResponseOutput::close(std::string_view item_status, std::string& events) {
  if (open_ == Open::kNone) return;
  json& item = items_.back();
  const size_t index = items_.size() - 1;
  const bool message = open_ == Open::kMessage;
  json& part = item["content"][0];
  part["text"] = open_text_;
  if (message) {
    emit({{"type", "response.output_text.done"},
          {"item_id", item["id"]},
          {"output_index", index},
          {"content_index", 0},
          {"text", open_text_},
          {"logprobs", json::array()}},
         events);
  } else {
    emit({{"type", "response.reasoning_text.done"},
          {"item_id", item["id"]},
          {"output_index", index},
          {"content_index", 0},
          {"text", open_text_}},
         events);
  }
  emit({{"type", "response.content_part.done"},
        {"item_id", item["id"]},
        {"output_index", index},
        {"content_index", 0},
        {"part", part}},
       events);
  item["status"] = item_status;
  emit({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}}, events);
  open_ = Open::kNone;
  open_text_.clear();
}

void ResponseOutput::call(const ToolCall& call, std::string& events) {
  close("completed", events);
  json item = {{"id", new_item_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
               {"call_id", call.id},       {"name", call.name},       {"arguments", ""}};
  const size_t index = items_.size();
  emit({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}}, events);
  emit({{"type", "response.function_call_arguments.delta"},
        {"item_id", item["id"]},
        {"output_index", index},
        {"delta", call.arguments}},
       events);
  emit({{"type", "response.function_call_arguments.done"},
        {"item_id", item["id"]},
        {"output_index", index},
        {"name", call.name},
        {"arguments", call.arguments}},
       events);
  item["arguments"] = call.arguments;
  item["status"] = call.whole ? "completed" : "incomplete";  // a forced call max_output_tokens cut short
  emit({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}}, events);
  items_.push_back(std::move(item));
}

void ResponseOutput::finish(std::string_view item_status, std::string& events) {
  if (items_.empty()) open(Open::kMessage, events);
  close(item_status, events);
}

void ResponseOutput::end(const nlohmann::json& response, std::string& events) {
  const std::string status = response.value("status", std::string());
  const char* type = status == "incomplete" ? "response.incomplete"
                     : status == "failed"   ? "response.failed"
                                            : "response.completed";
  emit({{"type", type}, {"response", response}}, events);
}

void ResponseOutput::error(const nlohmann::json& error_object, std::string& events) {
  json payload = {{"type", "error"}};
  for (const auto& [key, value] : error_object.items()) payload[key] = value;
  emit(std::move(payload), events);
}

}  // namespace hearth::server

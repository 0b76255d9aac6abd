#pragma once
// ResponsesGeneration (responses.cpp creates it): the Generation (api/generation.h) of POST /v1/responses. One
// engine request; its answer goes through ResponseOutput (responses_json.h) as it arrives, so a streamed response
// (the typed events) and a whole one have the same output items. A harmony or Gemma 4 model's answer is parsed into
// reasoning, text and calls (its ChannelParser); another model's calls (with tools) are parsed at the end, text that
// may be a call held back meanwhile. At the end the response is kept in the ResponseStore (with "store": true), with
// the conversation's exact ids.

#include <memory>
#include <optional>
#include <string>

#include "server/api/generation.h"
#include "server/api/harmony.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_json.h"
#include "server/responses/responses_prompt.h"

namespace hearth::server {

class ResponsesGeneration : public Generation, public std::enable_shared_from_this<ResponsesGeneration> {
 public:
  ResponsesGeneration(ServerContext& context, std::shared_ptr<ResponseStore> store, ResponsesRequest request,
                      ResponseHead head, ResponsesPrompt prompt, std::unique_ptr<RequestHandle> handle);

  void start(std::function<void()> wake) override { handle_->set_notify(std::move(wake)); }
  Chunk pull() override;
  void cancel() override;
  std::string keep_alive() override { return ": keep-alive\n\n"; }

 private:
  void read(const RequestOutput& out, std::string& events);
  // The answer has ended: the last items, the response (kept when asked), the final event or the whole body.
  void finish(const RequestOutput& out, Chunk& chunk, std::string& events);
  // The engine refused or ended the request: the error response, or an error event.
  void fail(const RequestOutput& out, Chunk& chunk, std::string& events);
  // The answer memory and the metrics, from the final output (whoever reads it).
  void record(const RequestOutput& out);
  // Keeps the finished response and its conversation (store: true).
  void keep(const RequestOutput& out, const nlohmann::json& response);
  void drain_after_cancel();

  std::shared_ptr<ResponseStore> store_;
  ResponsesRequest request_;
  ResponseHead head_;
  ResponsesPrompt prompt_;
  std::unique_ptr<RequestHandle> handle_;
  ToolCallFormat format_;
  std::optional<ToolCallStream> tools_;   // with tools: holds back what may be a call
  std::unique_ptr<ChannelParser> channels_;  // a harmony or Gemma 4 model's answer (ServerContext::channel_parser)
  ResponseOutput output_;
  std::string text_;       // the message text of the answer
  std::string reasoning_;  // its reasoning
  std::vector<ToolCall> calls_;
  bool head_sent_ = false;
  bool done_ = false;
};

}  // namespace hearth::server

// The Anthropic Messages wire format and the retention fields: parsing with breakpoints, marker removal, the
// usage split, stop reasons, the error shape, TTL strings and cache_retention.
#include "server/anthropic/anthropic_json.h"

#include <gtest/gtest.h>

#include "server/cache/retention_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

MessagesRequest parse_ok(const json& body) {
  auto r = parse_messages_request(body.dump(), "n0nce");
  if (!r) ADD_FAILURE() << r.error().message;
  return std::move(r).value();
}

ApiError parse_error(const json& body) {
  auto r = parse_messages_request(body.dump(), "n0nce");
  EXPECT_FALSE(r.ok()) << body.dump();
  return r.ok() ? ApiError{} : r.error();
}

TEST(MessagesJson, SystemBlocksAndBreakpointsBecomeAChatWithMarkers) {
  const MessagesRequest r = parse_ok(json::parse(R"({
    "model": "claude", "max_tokens": 7, "temperature": 0.5, "top_k": 3, "stop_sequences": ["END"],
    "metadata": {"user_id": "u"},
    "system": [{"type": "text", "text": "Rules."}, {"type": "text", "text": " More.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]},
                 {"role": "assistant", "content": "Hello"}]})"));
  ASSERT_EQ(r.breakpoints.size(), 2u);
  EXPECT_EQ(r.breakpoints[0].ttl_ms, 3'600'000);
  EXPECT_EQ(r.breakpoints[1].ttl_ms, kDefaultBreakpointTtlMs);
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[0]["role"], "system");
  EXPECT_EQ(r.chat.messages[0]["content"], "Rules. More." + r.breakpoints[0].marker);
  EXPECT_EQ(r.chat.messages[1]["content"], "Hi" + r.breakpoints[1].marker);
  EXPECT_EQ(r.chat.messages[2]["content"], "Hello");
  EXPECT_EQ(r.chat.max_tokens, 7);
  EXPECT_EQ(r.chat.top_k, 3);
  EXPECT_FLOAT_EQ(r.chat.temperature, 0.5f);
  EXPECT_EQ(r.chat.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.chat.model, "claude");
}

TEST(MessagesJson, TakeBreakpointsCutsTheMarkersAndRecordsWhereTheyStood) {
  MessagesRequest r = parse_ok(json::parse(
      R"({"max_tokens": 1, "system": [{"type": "text", "text": "AB", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "CD", "cache_control": {"type": "ephemeral"}}]}]})"));
  std::string text = "<s>" + r.chat.messages[0]["content"].get<std::string>() + "|" +
                     r.chat.messages[1]["content"].get<std::string>() + "|end";
  ASSERT_TRUE(take_breakpoints(text, r.breakpoints));
  EXPECT_EQ(text, "<s>AB|CD|end");
  EXPECT_EQ(r.breakpoints[0].text_offset, 5u);
  EXPECT_EQ(r.breakpoints[1].text_offset, 8u);
  std::string dropped = "no markers";
  EXPECT_FALSE(take_breakpoints(dropped, r.breakpoints));
}

TEST(MessagesJson, RefusesWhatItDoesNotImplementAndBoundsEveryInput) {
  const json base = json::parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})");
  struct Case {
    const char* patch;
    const char* param;
  };
  const Case cases[] = {
      {R"({"max_tokens": null})", "max_tokens"},
      {R"({"max_tokens": 0})", "max_tokens"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})", "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]}]})",
       "messages[0].content[0].cache_control"},
      {R"({"tools": [{"name": "t"}]})", "tools[0].input_schema"},
      {R"({"tools": [{"type": "bash_20250124", "name": "bash"}]})", "tools[0].type"},
      {R"({"tools": [{"name": "", "input_schema": {}}]})", "tools[0].name"},
      {R"({"tools": [{"name": "t", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "u"}})",
       "tool_choice.name"},
      {R"({"tool_choice": {"type": "sometimes"}})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t"}]}]})",
       "messages[0].content[0]"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]})",
       "messages[0].content[0].tool_use_id"},
      {R"({"tool_choice": {"type": "any"}})", "tool_choice"},
      {R"({"thinking": {"type": "enabled", "budget_tokens": 1024}})", "thinking"},
      {R"({"temperature": 1.5})", "temperature"},
      {R"({"top_p": 0})", "top_p"},
      {R"({"top_k": -1})", "top_k"},
      {R"({"stop_sequences": [""]})", "stop_sequences"},
      {R"({"stop_sequences": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})",
       "stop_sequences"},
      {R"({"system": 5})", "system"},
      {R"({"metadata": "x"})", "metadata"},
      {R"({"cache_prompt": "no"})", "cache_prompt"},
  };
  for (const Case& c : cases) {
    json body = base;
    body.merge_patch(json::parse(c.patch));
    const ApiError e = parse_error(body);
    EXPECT_EQ(e.status, 400) << c.patch;
    EXPECT_EQ(e.param, c.param) << c.patch << ": " << e.message;
  }
  json five = base;
  for (int i = 0; i < 5; ++i) {
    five["messages"].push_back(
        {{"role", "user"},
         {"content", json::array({{{"type", "text"}, {"text", "x"}, {"cache_control", {{"type", "ephemeral"}}}}})}});
  }
  EXPECT_NE(parse_error(five).message.find("maximum of 4"), std::string::npos);
  // Stop strings of at most 256 bytes (each costs its square per token on the engine thread), at most 128 tools.
  json long_stop = base;
  long_stop["stop_sequences"] = {std::string(257, 'a')};
  EXPECT_EQ(parse_error(long_stop).message, "'stop_sequences' holds a string of 257 bytes; at most 256 bytes are allowed");
  long_stop["stop_sequences"] = {std::string(256, 'a')};
  EXPECT_EQ(parse_ok(long_stop).chat.stop.size(), 1u);
  json tools = base;
  for (int i = 0; i < 129; ++i) tools["tools"].push_back({{"name", "t" + std::to_string(i)}, {"input_schema", json::object()}});
  EXPECT_EQ(parse_error(tools).message, "'tools' has 129 tools; at most 128 are allowed");
  tools["tools"].erase(128);
  EXPECT_EQ(parse_ok(tools).chat.tools.size(), 128u);
  // An empty tools array asks for no tool.
  EXPECT_TRUE(parse_ok(json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tools": []})"))
                  .breakpoints.empty());
}

TEST(MessagesJson, CachePromptFalseKeepsThePromptOutOfTheCacheAsOnTheOpenAiRoutes) {
  const json base = json::parse(R"({"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_TRUE(parse_ok(base).chat.use_cache);
  json off = base;
  off["cache_prompt"] = false;
  EXPECT_FALSE(parse_ok(off).chat.use_cache);
}

TEST(MessagesJson, ToolsToolUseAndToolResultBecomeTheOpenAiChat) {
  const MessagesRequest r = parse_ok(json::parse(R"({
    "model": "claude", "max_tokens": 7,
    "tools": [{"name": "lights", "description": "Turn lights on", "input_schema": {"type": "object",
                "properties": {"room": {"type": "string"}}}},
              {"name": "heater", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "tool_choice": {"type": "tool", "name": "heater", "disable_parallel_tool_use": true},
    "messages": [{"role": "user", "content": "Warm the hall"},
                 {"role": "assistant", "content": [{"type": "text", "text": "Sure."},
                   {"type": "tool_use", "id": "toolu_1", "name": "heater", "input": {"room": "hall"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 C"},
                   {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                    "content": [{"type": "text", "text": "offline", "cache_control": {"type": "ephemeral"}}]},
                   {"type": "text", "text": "Thanks"}]}]})"));
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[0], json::parse(R"({"type": "function", "function": {"name": "lights",
    "description": "Turn lights on", "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}})"));
  ASSERT_EQ(r.breakpoints.size(), 2u);
  EXPECT_TRUE(r.breakpoints[0].ends_json_object);  // the tool's: in its description
  EXPECT_EQ(r.chat.tools[1]["function"]["description"], r.breakpoints[0].marker);
  EXPECT_EQ(r.chat.tool_choice, CompletionRequest::ToolChoice::kFunction);
  EXPECT_EQ(r.chat.tool_choice_name, "heater");
  ASSERT_EQ(r.chat.messages.size(), 5u);
  EXPECT_EQ(r.chat.messages[0]["content"], r.anchor + "Warm the hall");
  EXPECT_EQ(r.chat.messages[1],
            json::parse(R"({"role": "assistant", "content": "Sure.", "tool_calls": [{"id": "toolu_1",
    "type": "function", "function": {"name": "heater", "arguments": {"room": "hall"}}}]})"));
  EXPECT_EQ(r.chat.messages[2], json::parse(R"({"role": "tool", "tool_call_id": "toolu_1", "content": "21 C"})"));
  EXPECT_EQ(r.chat.messages[3]["role"], "tool");
  EXPECT_EQ(r.chat.messages[3]["content"], "Error: offline" + r.breakpoints[1].marker);
  EXPECT_EQ(r.chat.messages[4], json::parse(R"({"role": "user", "content": "Thanks"})"));
  // tool_choice any forces a call to any tool; none turns them off.
  json body = json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}})");
  EXPECT_EQ(parse_ok(body).chat.tool_choice, CompletionRequest::ToolChoice::kRequired);
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_FALSE(parse_ok(body).chat.tools_active());
}

TEST(MessagesJson, AToolBreakpointEndsWithTheToolsJsonObject) {
  MessagesRequest r = parse_ok(json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object", "properties": {"a": {"enum": ["}"]}}},
               "cache_control": {"type": "ephemeral"}}]})"));
  // As a template prints it (tojson): the breakpoint is after the whole function object, not at the marker.
  const std::string user = r.chat.messages[0]["content"].get<std::string>();
  EXPECT_EQ(user, r.anchor + "x");
  std::string text = "<tools>" + r.chat.tools[0].dump() + "</tools>" + user;
  ASSERT_TRUE(take_breakpoints(text, r.breakpoints, r.anchor));
  EXPECT_EQ(text.find("hearth-cache"), std::string::npos) << text;
  const std::string expected =
      R"(<tools>{"function":{"description":"d","name":"t","parameters":{"properties":{"a":{"enum":["}"]}},"type":"object"}})";
  EXPECT_EQ(text.substr(0, r.breakpoints[0].text_offset), expected);
  // A template that prints the description bare: the breakpoint stays where the marker stood.
  r = parse_ok(json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "t", "description": "d", "input_schema": {}, "cache_control": {"type": "ephemeral"}}]})"));
  const std::string marked = r.chat.tools[0]["function"]["description"].get<std::string>();
  text = "t: " + marked + " end" + r.chat.messages[0]["content"].get<std::string>();
  ASSERT_TRUE(take_breakpoints(text, r.breakpoints, r.anchor));
  EXPECT_EQ(text.substr(0, r.breakpoints[0].text_offset), "t: d");
  // A template that does not print descriptions (the fallback format): the breakpoint is where the messages begin.
  text = "Tools: t\n\n" + r.chat.messages[0]["content"].get<std::string>() + "\nAssistant:";
  ASSERT_TRUE(take_breakpoints(text, r.breakpoints, r.anchor));
  EXPECT_EQ(text, "Tools: t\n\nx\nAssistant:");
  EXPECT_EQ(r.breakpoints[0].text_offset, 10u);
  // Without the anchor a dropped marker is still an error, as for every other block.
  text = "Tools: t\n\nx";
  EXPECT_FALSE(take_breakpoints(text, r.breakpoints, r.anchor));
}

TEST(MessagesJson, AnswersWithCallsBecomeToolUseBlocks) {
  MessagesRequest r = parse_ok(json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "lights", "input_schema": {"type": "object"}}]})"));
  const MessagesAnswer a = messages_answer(r.chat, ToolCallFormat::kHermes,
                                           "On it.\n<tool_call>\n{\"name\": \"lights\", \"arguments\": {\"room\": "
                                           "\"hall\"}}\n</tool_call>",
                                           FinishReason::kStop);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.text, "On it.");
  EXPECT_TRUE(a.calls[0].id.starts_with("toolu_") && a.calls[0].id.size() == 30) << a.calls[0].id;
  const json m = message_json("msg_1", "m", a, FinishReason::kStop, "", {});
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 2u);
  EXPECT_EQ(m["content"][0], json::parse(R"({"type": "text", "text": "On it."})"));
  EXPECT_EQ(m["content"][1]["type"], "tool_use");
  EXPECT_EQ(m["content"][1]["name"], "lights");
  EXPECT_EQ(m["content"][1]["input"], json::parse(R"({"room": "hall"})"));
  // A call to an unknown tool, or with tool_choice none, is text.
  EXPECT_TRUE(
      messages_answer(r.chat, ToolCallFormat::kJson, R"({"name": "oven", "arguments": {}})", FinishReason::kStop)
          .calls.empty());
  r.chat.tool_choice = CompletionRequest::ToolChoice::kNone;
  EXPECT_TRUE(
      messages_answer(r.chat, ToolCallFormat::kJson, R"({"name": "lights", "arguments": {}})", FinishReason::kStop)
          .calls.empty());
  // disable_parallel_tool_use: only the first of several calls.
  r.chat.tool_choice = CompletionRequest::ToolChoice::kAuto;
  const std::string two =
      "<tool_call>\n{\"name\": \"lights\", \"arguments\": {\"room\": \"a\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"lights\", \"arguments\": {\"room\": \"b\"}}\n</tool_call>";
  EXPECT_EQ(messages_answer(r.chat, ToolCallFormat::kHermes, two, FinishReason::kStop).calls.size(), 2u);
  json single = json::parse(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "lights", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}})");
  const MessagesAnswer one = messages_answer(parse_ok(single).chat, ToolCallFormat::kHermes, two, FinishReason::kStop);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].arguments, R"({"room":"a"})");
  // Mistral's templates need 9 alphanumerics.
  r.chat.tool_choice = CompletionRequest::ToolChoice::kAuto;
  const MessagesAnswer mistral = messages_answer(r.chat, ToolCallFormat::kMistral,
                                                 R"([{"name": "lights", "arguments": {}}])", FinishReason::kStop);
  ASSERT_EQ(mistral.calls.size(), 1u);
  EXPECT_EQ(mistral.calls[0].id.size(), 9u);
}

TEST(MessagesJson, UsageSplitsReadCreationAndTheRest) {
  RequestUsage u;
  u.prompt_tokens = 100;
  u.completion_tokens = 5;
  u.cached_tokens = 30;
  const MessagesUsage m = messages_usage(u, 80);
  EXPECT_EQ(m.cache_read_input_tokens, 30);
  EXPECT_EQ(m.cache_creation_input_tokens, 50);
  EXPECT_EQ(m.input_tokens, 20);
  EXPECT_EQ(m.output_tokens, 5);
  const MessagesUsage past = messages_usage(u, 20);  // the breakpoint lies inside what was read
  EXPECT_EQ(past.cache_creation_input_tokens, 0);
  EXPECT_EQ(past.input_tokens, 70);
}

TEST(MessagesJson, StopReasonsAndErrorShape) {
  EXPECT_EQ(stop_reason_json(FinishReason::kStop, ""), "end_turn");
  EXPECT_EQ(stop_reason_json(FinishReason::kStop, "END"), "stop_sequence");
  EXPECT_EQ(stop_reason_json(FinishReason::kLength, ""), "max_tokens");
  EXPECT_TRUE(stop_reason_json(FinishReason::kAborted, "").is_null());
  EXPECT_EQ(anthropic_error_json(invalid_request("bad")),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(anthropic_error_json(ApiError{401, "no key"})["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(ApiError{503, "busy"})["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_event(json{{"type", "ping"}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

TEST(RetentionJson, TtlStringsAreBounded) {
  EXPECT_EQ(parse_ttl("90s"), 90'000);
  EXPECT_EQ(parse_ttl("5m"), 300'000);
  EXPECT_EQ(parse_ttl("1h"), 3'600'000);
  EXPECT_EQ(parse_ttl("30d"), kMaxRetentionTtlMs);
  for (const char* bad : {"", "5", "m", "0s", "-1h", "31d", "1.5h", "5 m", "99999999999999d", "1w"}) {
    EXPECT_FALSE(parse_ttl(bad).has_value()) << bad;
  }
}

TEST(RetentionJson, CacheRetentionIsValidatedStrictly) {
  auto ok = parse_cache_retention(json::parse(R"({"priority": 90, "ttl": "1h", "tokens": 64})"), "cache_retention");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->priority, 90);
  EXPECT_EQ(ok->ttl_ms, 3'600'000);
  EXPECT_EQ(ok->num_tokens, 64);
  auto defaults = parse_cache_retention(json::object(), "cache_retention");
  EXPECT_EQ(defaults->priority, kDefaultRetentionPriority);
  EXPECT_EQ(defaults->ttl_ms, 0);
  for (const char* bad : {R"({"priority": 101})", R"({"priority": 1.5})", R"({"ttl": 60})", R"({"tokens": 0})",
                          R"({"extra": 1})", R"([1])"}) {
    auto r = parse_cache_retention(json::parse(bad), "cache_retention");
    EXPECT_FALSE(r.ok()) << bad;
  }
}

}  // namespace
}  // namespace hearth::server

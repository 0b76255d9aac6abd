// The Responses API's parts without a model: the request reader (input items to chat messages, tools, text.format,
// the fields it refuses by name), the output builder (the typed events and the items they announce), the response
// store (bounds, expiry, tenants) and follow_up_text (what follows a stored turn's ids, per chat template).

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../tokenizer/tokenizer_test_util.h"
#include "server/api/chat.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_json.h"
#include "server/responses/responses_prompt.h"
#include "server/responses/responses_request.h"
#include "template/chat_template.h"

namespace hearth::server {
namespace {

using nlohmann::json;

ResponsesRequest parse_ok(const json& body) {
  auto r = parse_responses_request(body.dump());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : ResponsesRequest{};
}

ApiError parse_error(const json& body) {
  auto r = parse_responses_request(body.dump());
  EXPECT_FALSE(r.ok()) << body.dump();
  return r.ok() ? ApiError{} : r.error();
}

TEST(ResponsesRequest, TextInputAndInstructionsAreASystemAndAUserMessage) {
  const ResponsesRequest r = parse_ok({{"model", "m"}, {"input", "Hi"}, {"instructions", "Be brief."}});
  EXPECT_EQ(r.chat.messages,
            json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])"));
  EXPECT_EQ(r.input_messages, json::parse(R"([{"role":"user","content":"Hi"}])"));
  EXPECT_TRUE(r.store);
  EXPECT_EQ(r.chat.endpoint, Endpoint::kChat);
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["tools"], json::array());
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const json input = json::parse(R"([
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                     {"type": "input_text", "text": "in Oslo?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Need it."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "4C"}])");
  const ResponsesRequest r = parse_ok({{"input", input}});
  const json expected = json::parse(R"([
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Need it.",
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                      "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4C"}])");
  EXPECT_EQ(r.chat.messages, expected);
}

TEST(ResponsesRequest, FunctionToolsToolChoiceAndTextFormat) {
  const json body = json::parse(R"({"input": "x", "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "f", "description": "d", "strict": true,
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}],
    "tool_choice": {"type": "function", "name": "f"}})");
  const ResponsesRequest r = parse_ok(body);
  EXPECT_EQ(r.chat.tools, json::parse(R"([{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])"));
  EXPECT_EQ(r.chat.tool_choice, CompletionRequest::ToolChoice::kFunction);
  EXPECT_EQ(r.chat.tool_choice_name, "f");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.echo["tools"], body["tools"]);

  const ResponsesRequest s = parse_ok(json::parse(R"({"input": "x", "text": {"format": {"type": "json_schema",
    "name": "n", "strict": true, "schema": {"type": "object", "properties": {"k": {"type": "string"}}}}}})"));
  EXPECT_NE(s.chat.grammar, nullptr);
  EXPECT_EQ(s.echo["text"]["format"]["name"], "n");
  const ApiError bad_schema = parse_error(json::parse(
      R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "frob"}}}})"));
  EXPECT_EQ(bad_schema.param.rfind("text.format", 0), 0u) << bad_schema.param;
  EXPECT_EQ(bad_schema.message.find("response_format"), std::string::npos) << bad_schema.message;
}

// Every field or value the server does not implement is a 400 naming it; nothing is dropped.
TEST(ResponsesRequest, RefusesWhatItDoesNotImplementByName) {
  const struct {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "file_search"}]})", "tools[1].type"},
      {R"({"input": "x", "frobnicate": 1})", "frobnicate"},
      {R"({"input": "x", "conversation": "c"})", "conversation"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": "x", "include": ["message.output_text.logprobs"]})", "include[0]"},
      {R"({"input": "x", "top_logprobs": 3})", "top_logprobs"},
      {R"({"input": "x", "reasoning": {"summary": "auto"}})", "reasoning.summary"},
      {R"({"input": "x", "text": {"verbosity": "low"}})", "text.verbosity"},
      {R"({"input": "x", "tool_choice": {"type": "web_search_preview"}})", "tool_choice.type"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
       "input[0].content[0].type"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type"},
      {R"({"input": [{"type": "function_call", "call_id": 1, "name": "f", "arguments": "{}"}]})", "input[0]"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "temperature": 3})", "temperature"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
      {R"({"model": "m"})", "input"},
      {R"({"input": []})", "input"},
  };
  for (const auto& c : cases) {
    const ApiError e = parse_error(json::parse(c.body));
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
  // Fields that cannot change the answer are accepted.
  parse_ok(json::parse(R"({"input": "x", "metadata": {"k": "v"}, "user": "u", "safety_identifier": "s",
    "prompt_cache_key": "p", "service_tier": "auto", "truncation": "disabled", "include": [], "store": false,
    "background": false, "stream_options": {"include_obfuscation": false}, "top_logprobs": 0})"));
}

// The events of a response with reasoning, text and a call: each opened item is announced, filled and closed, with
// sequence numbers counting from 0, and the items at the end are what the events built.
TEST(ResponseOutput, EventsAnnounceTheItemsTheyBuild) {
  ResponseOutput out;
  std::string events;
  out.start(json{{"id", "resp_1"}, {"status", "in_progress"}}, events);
  out.reasoning("Think", events);
  out.reasoning("ing.", events);
  out.text("Hel", events);
  out.text("lo", events);
  out.call(ToolCall{"call_1", "f", "{\"a\":1}"}, events);
  out.finish("completed", events);
  out.end(json{{"status", "completed"}}, events);

  std::vector<json> parsed;
  std::istringstream in(events);
  std::string line;
  std::string type;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) type = line.substr(7);
    if (line.rfind("data: ", 0) != 0) continue;
    parsed.push_back(json::parse(line.substr(6)));
    EXPECT_EQ(parsed.back()["type"], type);
  }
  std::vector<std::string> types;
  for (size_t i = 0; i < parsed.size(); ++i) {
    EXPECT_EQ(parsed[i]["sequence_number"], i);
    types.push_back(parsed[i]["type"]);
  }
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(types, expected);
  const json& items = out.items();
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0]["type"], "reasoning");
  EXPECT_EQ(items[0]["content"][0], json({{"type", "reasoning_text"}, {"text", "Thinking."}}));
  EXPECT_EQ(items[1]["type"], "message");
  EXPECT_EQ(items[1]["content"][0]["text"], "Hello");
  EXPECT_EQ(items[1]["status"], "completed");
  EXPECT_EQ(items[2]["type"], "function_call");
  EXPECT_EQ(items[2]["call_id"], "call_1");
  EXPECT_EQ(items[2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(parsed[5]["output_index"], 0);
  EXPECT_EQ(parsed[11]["output_index"], 1);
  EXPECT_EQ(parsed[11]["item_id"], items[1]["id"]);
  EXPECT_EQ(parsed[16]["output_index"], 2);
}

// An answer with no text still has one (empty) message, incomplete when cut by the token limit.
TEST(ResponseOutput, AnEmptyAnswerIsOneEmptyMessage) {
  ResponseOutput out;
  std::string events;
  out.finish("incomplete", events);
  ASSERT_EQ(out.items().size(), 1u);
  EXPECT_EQ(out.items()[0]["type"], "message");
  EXPECT_EQ(out.items()[0]["status"], "incomplete");
  EXPECT_EQ(out.items()[0]["content"][0]["text"], "");
  EXPECT_EQ(response_status(FinishReason::kLength), "incomplete");
  EXPECT_EQ(response_status(FinishReason::kStop), "completed");
  const json r = response_object(ResponseHead{"resp_1", 5, "m", std::nullopt, "", true, json::object()}, "incomplete",
                                 out.items(), nullptr);
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["previous_response_id"], nullptr);
  EXPECT_EQ(r["object"], "response");
}

StoredResponse stored(std::string id, std::string salt, size_t num_tokens = 4) {
  StoredResponse s;
  s.id = std::move(id);
  s.cache_salt = std::move(salt);
  s.tokens.assign(num_tokens, TokenId{7});
  return s;
}

TEST(ResponseStore, OnlyTheSameSaltFindsOrDeletesAResponse) {
  ResponseStore store({});
  ASSERT_TRUE(store.put(stored("resp_a", "alice")));
  EXPECT_EQ(store.get("bob", "resp_a"), nullptr);
  EXPECT_EQ(store.get("", "resp_a"), nullptr);
  EXPECT_FALSE(store.remove("bob", "resp_a"));
  ASSERT_NE(store.get("alice", "resp_a"), nullptr);
  EXPECT_EQ(store.get("alice", "resp_a")->tokens.size(), 4u);
  EXPECT_TRUE(store.remove("alice", "resp_a"));
  EXPECT_EQ(store.get("alice", "resp_a"), nullptr);
  EXPECT_FALSE(store.remove("alice", "resp_a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, BoundedByCountBytesAndAge) {
  using Clock = ResponseStore::Clock;
  const Clock::time_point t0{};
  ResponseStore by_count({.max_entries = 2, .max_bytes = size_t{1} << 20, .ttl = std::chrono::seconds(60)});
  for (const char* id : {"r1", "r2", "r3"}) ASSERT_TRUE(by_count.put(stored(id, ""), t0));
  EXPECT_EQ(by_count.get("", "r1", t0), nullptr) << "the oldest goes first";
  EXPECT_NE(by_count.get("", "r2", t0), nullptr);
  EXPECT_NE(by_count.get("", "r3", t0), nullptr);
  EXPECT_EQ(by_count.size(), 2u);

  const size_t one = stored("r1", "", 100).bytes();
  ResponseStore by_bytes({.max_entries = 100, .max_bytes = 2 * one + one / 2, .ttl = std::chrono::seconds(60)});
  for (const char* id : {"r1", "r2", "r3"}) ASSERT_TRUE(by_bytes.put(stored(id, "", 100), t0));
  EXPECT_EQ(by_bytes.size(), 2u);
  EXPECT_LE(by_bytes.bytes(), 2 * one + one / 2);
  EXPECT_EQ(by_bytes.get("", "r1", t0), nullptr);
  EXPECT_FALSE(by_bytes.put(stored("huge", "", 1000), t0)) << "larger than the whole store";

  ResponseStore by_age({.max_entries = 100, .max_bytes = size_t{1} << 20, .ttl = std::chrono::seconds(60)});
  ASSERT_TRUE(by_age.put(stored("old", ""), t0));
  ASSERT_TRUE(by_age.put(stored("new", ""), t0 + std::chrono::seconds(30)));
  EXPECT_NE(by_age.get("", "old", t0 + std::chrono::seconds(59)), nullptr);
  EXPECT_EQ(by_age.get("", "old", t0 + std::chrono::seconds(60)), nullptr) << "expired at its ttl";
  EXPECT_NE(by_age.get("", "new", t0 + std::chrono::seconds(60)), nullptr);
  EXPECT_EQ(by_age.size(), 1u);

  ResponseStore off({.max_entries = 0});
  EXPECT_FALSE(off.put(stored("r", "")));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<ChatFormatter> formatter(const std::string& template_path, const Tokenizer& tokenizer) {
  auto tmpl = template_path.empty() ? Result<ChatTemplate>(ChatTemplate::fallback())
                                    : ChatTemplate::parse(read_file(template_path));
  EXPECT_TRUE(tmpl.ok());
  return ChatFormatter::create(std::move(*tmpl), tokenizer);
}

// A turn as the route stores it: the conversation, the answer message last, and the answer's text.
StoredResponse turn(const ChatFormatter& chat, json messages, json answer, std::string answer_text) {
  StoredResponse s;
  s.id = "resp_1";
  auto prompt = chat.render(messages, nullptr);
  EXPECT_TRUE(prompt.ok());
  s.response = *prompt;  // the prompt text, for the test to compare with
  messages.push_back(std::move(answer));
  s.messages = std::move(messages);
  s.answer_text = std::move(answer_text);
  return s;
}

// Where the template renders an answer as the model wrote it, the stored prompt, the answer and follow_up_text are
// exactly the whole conversation rendered anew: the follow-up differs from a fresh render only in its ids.
TEST(FollowUpText, ContinuesTheRenderedConversationExactly) {
  const std::string templates = test::shared_path("templates/");
  const struct {
    std::string template_path;
    std::string vocab;
  } cases[] = {
      {"", "models/stories260K.gguf"},
      {templates + "Qwen-Qwen2.5-7B-Instruct.jinja", "vocab/ggml-vocab-qwen2.gguf"},
      {templates + "meta-llama-Llama-3.1-8B-Instruct.jinja", "vocab/ggml-vocab-llama-bpe.gguf"},
  };
  const json first = json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  const json input = json::parse(R"([{"role": "user", "content": "More?"}])");
  for (const auto& c : cases) {
    const auto chat = formatter(c.template_path, test::cached_tokenizer(c.vocab));
    const StoredResponse s = turn(*chat, first, {{"role", "assistant"}, {"content", "Hello there."}}, "Hello there.");
    const std::optional<std::string> rest = follow_up_text(*chat, s, input);
    ASSERT_TRUE(rest.has_value()) << c.template_path;
    json all = s.messages;
    all.push_back(input[0]);
    auto whole = chat->render(all, nullptr);
    ASSERT_TRUE(whole.ok());
    EXPECT_EQ(s.response.get<std::string>() + "Hello there." + *rest, *whole) << c.template_path;
  }
}

// A call's turn continues after the model's own text of it: in the generic JSON format the template adds nothing
// for the call; in harmony the turn ends at <|call|>, the stop the engine dropped, then the tool's result follows.
TEST(FollowUpText, AfterACallComesTheToolResult) {
  const json first = json::parse(R"([{"role": "user", "content": "Weather?"}])");
  const json call = json::parse(R"({"role": "assistant", "content": "", "tool_calls": [{"id": "call_1",
    "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]})");
  const json input = json::parse(R"([{"role": "tool", "tool_call_id": "call_1", "content": "4C"}])");

  const auto fallback = formatter("", test::stories());
  const std::string raw = R"({"name": "get_weather", "arguments": {"city": "Oslo"}})";
  const std::optional<std::string> rest = follow_up_text(*fallback, turn(*fallback, first, call, raw), input);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(*rest, "\nTool: 4C\nAssistant:");

  const auto harmony = formatter(std::string(HEARTH_TEST_DATA_DIR) + "/openai-gpt-oss-120b.jinja",
                                 test::cached_tokenizer("vocab/ggml-vocab-gpt-oss.gguf"));
  ASSERT_TRUE(harmony->harmony());
  const std::optional<std::string> h =
      follow_up_text(*harmony,
                     turn(*harmony, first, call,
                          "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                          "<|message|>{\"city\":\"Oslo\"}"),
                     input);
  ASSERT_TRUE(h.has_value());
  EXPECT_TRUE(h->starts_with("<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"))
      << *h;
  EXPECT_NE(h->find("4C"), std::string::npos) << *h;
  EXPECT_TRUE(h->ends_with("<|start|>assistant")) << *h;

  // A harmony text answer ends its turn with <|end|>.
  const std::optional<std::string> t =
      follow_up_text(*harmony, turn(*harmony, first, {{"role", "assistant"}, {"content", "Sunny."}}, "Sunny."),
                     json::parse(R"([{"role": "user", "content": "Thanks"}])"));
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->starts_with("<|end|><|start|>user<|message|>Thanks<|end|>")) << *t;
}

}  // namespace
}  // namespace hearth::server

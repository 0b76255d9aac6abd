// Tool calls (server/api/tool_calls.h): the format each real template speaks, the parser per format, the forced-call
// grammar whose every output parses back, the stream filter, the response shapes, and a tool conversation rendered
// through the real templates.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <tuple>

#include "server/api/tool_calls.h"
#include "server/openai/openai_json.h"
#include "template/chat_template.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(HEARTH_SHARED_DIR) + "/templates/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "lights_on", "description": "Turn a room's lights on",
   "parameters": {"type": "object", "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"]},
                  "level": {"type": "integer"}}, "required": ["room"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
])");

TEST(ToolCallFormat, DetectedFromTheRealTemplates) {
  const std::pair<const char*, ToolCallFormat> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral},
      {"google-gemma-2-2b-it.jinja", ToolCallFormat::kJson},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::kJson},
  };
  for (const auto& [name, format] : cases) {
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(read_template(name))), tool_call_format_name(format))
        << name;
  }
}

struct ParseCase {
  const char* name;
  ToolCallFormat format;
  const char* text;
  const char* content;                                     // nullptr: not a tool call
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

class ParseToolCalls : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseToolCalls, GivesTheCallsOrPlainText) {
  const ParseCase& c = GetParam();
  auto parsed = parse_tool_calls(c.format, c.text, kTools);
  if (c.content == nullptr) {
    EXPECT_FALSE(parsed) << c.text;
    return;
  }
  ASSERT_TRUE(parsed) << c.text;
  EXPECT_EQ(parsed->content, c.content);
  ASSERT_EQ(parsed->calls.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(parsed->calls[i].name, c.calls[i].first);
    EXPECT_EQ(parsed->calls[i].arguments, c.calls[i].second);
    EXPECT_TRUE(parsed->calls[i].id.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ParseToolCalls,
    ::testing::Values(
        ParseCase{"hermes_one",
                  ToolCallFormat::kHermes,
                  "<tool_call>\n{\"name\": \"lights_on\", \"arguments\": {\"room\": \"hall\", \"level\": 3}}\n"
                  "</tool_call>",
                  "",
                  {{"lights_on", R"({"room":"hall","level":3})"}}},
        ParseCase{"hermes_two_with_content",
                  ToolCallFormat::kHermes,
                  "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                  "<tool_call>\n{\"name\": \"lights_on\", \"arguments\": {\"room\": \"kitchen\"}}\n</tool_call>",
                  "Sure.",
                  {{"get_weather", R"({"city":"Oslo"})"}, {"lights_on", R"({"room":"kitchen"})"}}},
        ParseCase{"hermes_unclosed_at_the_end",
                  ToolCallFormat::kHermes,
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
                  "",
                  {{"get_weather", R"({"city":"Oslo"})"}}},
        ParseCase{"hermes_arguments_do_not_parse",
                  ToolCallFormat::kHermes,
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Oslo}}\n</tool_call>",
                  nullptr,
                  {}},
        ParseCase{"hermes_unknown_function",
                  ToolCallFormat::kHermes,
                  "<tool_call>\n{\"name\": \"open_door\", \"arguments\": {}}\n</tool_call>",
                  nullptr,
                  {}},
        ParseCase{"hermes_plain_text", ToolCallFormat::kHermes, "Once upon a time", nullptr, {}},
        ParseCase{"llama3_parameters",
                  ToolCallFormat::kLlama3,
                  " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                  "",
                  {{"get_weather", R"({"city":"Paris"})"}}},
        ParseCase{"llama3_arguments_string",
                  ToolCallFormat::kLlama3,
                  R"({"name": "get_weather", "parameters": "{\"city\": \"Paris\"}"})",
                  "",
                  {{"get_weather", R"({"city":"Paris"})"}}},
        ParseCase{"llama3_arguments_not_an_object",
                  ToolCallFormat::kLlama3,
                  R"({"name": "get_weather", "parameters": [1]})",
                  nullptr,
                  {}},
        ParseCase{"llama3_text_first",
                  ToolCallFormat::kLlama3,
                  R"(Here: {"name": "get_weather", "parameters": {}})",
                  nullptr,
                  {}},
        ParseCase{"mistral_marker_and_array",
                  ToolCallFormat::kMistral,
                  R"([TOOL_CALLS][{"name": "lights_on", "arguments": {"room": "hall"}}, {"name": "get_weather",
                    "arguments": {"city": "Rome"}}])",
                  "",
                  {{"lights_on", R"({"room":"hall"})"}, {"get_weather", R"({"city":"Rome"})"}}},
        ParseCase{"mistral_without_marker",
                  ToolCallFormat::kMistral,
                  R"([{"name": "lights_on", "arguments": {"room": "hall"}}])",
                  "",
                  {{"lights_on", R"({"room":"hall"})"}}},
        ParseCase{
            "mistral_truncated", ToolCallFormat::kMistral, R"([{"name": "lights_on", "arguments": {"ro)", nullptr, {}},
        ParseCase{"json_object",
                  ToolCallFormat::kJson,
                  R"({"name": "lights_on", "arguments": {"room": "hall"}})",
                  "",
                  {{"lights_on", R"({"room":"hall"})"}}},
        ParseCase{"json_no_arguments", ToolCallFormat::kJson, R"({"name": "lights_on"})", "", {{"lights_on", "{}"}}},
        ParseCase{"json_story", ToolCallFormat::kJson, R"({"story": "Once upon a time"})", nullptr, {}}),
    [](const auto& info) { return std::string(info.param.name); });

// The forced grammar's language parses back: a call written as the grammar dictates is accepted by the grammar
// and read back by the parser, for every format; a call the schema forbids is not accepted.
TEST(ForcedToolCall, GrammarOutputParsesBackInEveryFormat) {
  const std::pair<ToolCallFormat, std::string> cases[] = {
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"lights_on\", \"arguments\": {\"room\":\"hall\",\"level\":2}}\n</tool_call>"},
      {ToolCallFormat::kLlama3, R"({"name": "lights_on", "parameters": {"room":"hall","level":2}})"},
      {ToolCallFormat::kMistral, R"([{"name": "lights_on", "arguments": {"room":"hall","level":2}}])"},
      {ToolCallFormat::kJson, R"({"name": "lights_on", "arguments": {"room":"hall","level":2}})"},
  };
  for (const auto& [format, text] : cases) {
    auto grammar = forced_tool_call_grammar(format, kTools, "");
    ASSERT_TRUE(grammar) << grammar.error().message;
    GrammarState s = grammar->start();
    ASSERT_TRUE(grammar->advance(s, text)) << text;
    EXPECT_TRUE(Grammar::is_terminal(s)) << text;
    auto parsed = parse_tool_calls(format, text, kTools);
    ASSERT_TRUE(parsed) << text;
    ASSERT_EQ(parsed->calls.size(), 1u);
    EXPECT_EQ(parsed->calls[0].name, "lights_on");
    EXPECT_EQ(json::parse(parsed->calls[0].arguments), json::parse(R"({"room":"hall","level":2})"));
  }
  auto only_weather = forced_tool_call_grammar(ToolCallFormat::kJson, kTools, "get_weather");
  ASSERT_TRUE(only_weather);
  GrammarState s = only_weather->start();
  EXPECT_FALSE(only_weather->advance(s, R"({"name": "lights_on")"));
  GrammarState t = only_weather->start();
  EXPECT_FALSE(only_weather->advance(t, R"({"name": "get_weather", "arguments": {}})"));  // city is required
  json bad = kTools;
  bad[1]["function"]["parameters"]["properties"]["city"]["not"] = {{"const", "Paris"}};
  auto refused = forced_tool_call_grammar(ToolCallFormat::kJson, bad, "");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("'not' (at 'tools[1].function.parameters.properties.city')"),
            std::string::npos)
      << refused.error().message;
}

TEST(ToolCallStream, HoldsBackFromWhereACallMayStart) {
  ToolCallStream hermes(ToolCallFormat::kHermes, false);
  EXPECT_EQ(hermes.push("Let me check. <tool"), "Let me check. ");
  EXPECT_EQ(hermes.push("_call>\n{\"name\""), "");
  EXPECT_EQ(hermes.held(), "<tool_call>\n{\"name\"");
  ToolCallStream not_a_call(ToolCallFormat::kHermes, false);
  EXPECT_EQ(not_a_call.push("a <b"), "a <b");
  ToolCallStream json_text(ToolCallFormat::kJson, false);
  EXPECT_EQ(json_text.push("  "), "");
  EXPECT_EQ(json_text.push(" Once"), "   Once");
  EXPECT_EQ(json_text.push(" upon"), " upon");
  ToolCallStream json_call(ToolCallFormat::kJson, false);
  EXPECT_EQ(json_call.push(" {\"na"), "");
  EXPECT_EQ(json_call.held(), " {\"na");
  ToolCallStream forced(ToolCallFormat::kLlama3, true);
  EXPECT_EQ(forced.push("Once"), "");
  EXPECT_EQ(forced.held(), "Once");
}

CompletionRequest chat_request(const std::string& body) {
  auto parsed = parse_completion_request(body, Endpoint::kChat);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  return *parsed;
}

TEST(ToolCallResponse, WholeAndStreamedShapesFollowOpenAI) {
  CompletionRequest request = chat_request(
      json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", kTools}, {"stream", true}}.dump());
  const ResponseMeta meta{"chatcmpl-1", 7, "m", 0};
  ChoiceResult result =
      choice_with_tool_calls(request, ToolCallFormat::kJson,
                             R"({"name": "get_weather", "arguments": {"city": "Oslo"}})", FinishReason::kStop, nullptr);
  ASSERT_EQ(result.tool_calls.size(), 1u);
  EXPECT_TRUE(result.tool_calls[0].id.starts_with("call_"));
  const json whole = response_json(request, meta, std::span(&result, 1), json::object());
  const json& choice = whole["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
  const std::vector<json> chunks = tool_call_chunks_json(request, meta, result.tool_calls, true, 0);
  ASSERT_EQ(chunks.size(), 2u);
  const json& head = chunks[0]["choices"][0]["delta"];
  EXPECT_EQ(head["role"], "assistant");
  EXPECT_EQ(head["tool_calls"][0]["index"], 0);
  EXPECT_EQ(head["tool_calls"][0]["id"], result.tool_calls[0].id);
  EXPECT_EQ(head["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(head["tool_calls"][0]["function"]["arguments"], "");
  const json& args = chunks[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_FALSE(args.contains("id"));
  EXPECT_EQ(args["function"]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(tool_calls_finish_chunk_json(request, meta, 0)["choices"][0]["finish_reason"], "tool_calls");
  // tool_choice none: the same answer is text.
  request.tool_choice = CompletionRequest::ToolChoice::kNone;
  EXPECT_TRUE(
      choice_with_tool_calls(request, ToolCallFormat::kJson, R"({"name": "get_weather"})", FinishReason::kStop, nullptr)
          .tool_calls.empty());
}

// An OpenAI tool conversation (arguments as a JSON string, a tool result) through each real template: the call
// and the result reach the prompt in the template's own format.
TEST(ToolCallTemplates, ATurnWithACallAndItsResultRendersThroughTheRealTemplates) {
  const json body = {{"messages",
                      {{{"role", "user"}, {"content", "Weather in Oslo?"}},
                       {{"role", "assistant"},
                        {"content", nullptr},
                        {"tool_calls",
                         {{{"id", "abc123def"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Oslo"})"}}}}}}},
                       {{"role", "tool"}, {"tool_call_id", "abc123def"}, {"content", "4C and snow"}}}},
                     {"tools", kTools}};
  const CompletionRequest request = chat_request(body.dump());
  EXPECT_TRUE(request.messages[1]["tool_calls"][0]["function"]["arguments"].is_object());
  const std::pair<const char*, const char*> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      // (the request's objects keep sorted keys: nlohmann::json)
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja",
       "[TOOL_CALLS][{\"arguments\": {\"city\": \"Oslo\"}, \"name\": \"get_weather\", \"id\": \"abc123def\"}]"},
  };
  for (const auto& [name, call] : cases) {
    auto tmpl = ChatTemplate::parse(read_template(name));
    ASSERT_TRUE(tmpl) << name << ": " << tmpl.error().message;
    auto text = tmpl->render(request.messages, request.tools, true, "<s>", "</s>");
    ASSERT_TRUE(text) << name << ": " << text.error().message;
    EXPECT_NE(text->find(call), std::string::npos) << name << ":\n" << *text;
    EXPECT_NE(text->find("4C and snow"), std::string::npos) << name;
    EXPECT_NE(text->find("lights_on"), std::string::npos) << name << ": the tool catalogue is in the prompt";
  }
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

TEST(ToolCallTemplates, TheFallbackFormatListsToolNamesAndWritesCallsAsJson) {
  const CompletionRequest request = chat_request(json{
      {"messages",
       {{{"role", "user"}, {"content", "Hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"id", "c1"}, {"function", {{"name", "lights_on"}, {"arguments", R"({"room":"hall"})"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "done"}}}},
      {"tools", kTools}}.dump());
  auto text = ChatTemplate::fallback().render(request.messages, request.tools, true, "", "");
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text,
            "Tools: lights_on, get_weather\n\nUser: Hi\nAssistant:{\"name\": \"lights_on\", \"arguments\": "
            "{\"room\": \"hall\"}}\nTool: done\nAssistant:");
  auto parsed =
      parse_tool_calls(ToolCallFormat::kJson, R"({"name": "lights_on", "arguments": {"room": "hall"}})", request.tools);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->calls[0].arguments, R"({"room":"hall"})");
}

}  // namespace
}  // namespace hearth::server

namespace hearth::server {
namespace {

// A forced call cut short at every byte: never content, and once its name is whole, the call so far (not whole)
// with the arguments' text written so far; the whole text parses to the whole call.
TEST(ToolCallParser, ForcedCallCutShortIsATruncatedCallNeverText) {
  const std::string args = R"({"room": "hall", "level": 3})";
  const std::tuple<ToolCallFormat, std::string, std::string> cases[] = {
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"lights_on\", \"arguments\": " + args + "}\n</tool_call>",
       args},
      {ToolCallFormat::kLlama3, "{\"name\": \"lights_on\", \"parameters\": " + args + "}", args},
      {ToolCallFormat::kMistral, "[{\"name\": \"lights_on\", \"arguments\": " + args + "}]", args},
      {ToolCallFormat::kJson, "{\"name\": \"lights_on\", \"arguments\": " + args + "}", args},
      {ToolCallFormat::kGemma4, "<|tool_call>call:lights_on{level:3,room:<|\"|>hall<|\"|>}<tool_call|>", ""},
  };
  for (const auto& [format, text, raw_args] : cases) {
    const size_t name_end = text.find("lights_on") + std::string("lights_on").size() + 1;  // its closing quote or {
    for (size_t k = 0; k < text.size(); ++k) {
      const std::string cut = text.substr(0, k);
      auto parsed = parse_answer_calls(format, cut, kTools, /*forced_call_cut_short=*/true);
      ASSERT_TRUE(parsed.has_value()) << tool_call_format_name(format) << " at " << k;
      EXPECT_TRUE(parsed->content.empty()) << tool_call_format_name(format) << " at " << k;
      if (k < name_end) {
        EXPECT_TRUE(parsed->calls.empty()) << tool_call_format_name(format) << " at " << k;
        continue;
      }
      ASSERT_EQ(parsed->calls.size(), 1u) << tool_call_format_name(format) << " at " << k;
      const ToolCall& call = parsed->calls[0];
      EXPECT_EQ(call.name, "lights_on");
      if (call.whole) continue;  // a format whose closing markup is optional
      EXPECT_TRUE(raw_args.starts_with(call.arguments))
          << tool_call_format_name(format) << " at " << k << ": " << call.arguments;
    }
    auto whole = parse_answer_calls(format, text, kTools, true);
    ASSERT_TRUE(whole && whole->calls.size() == 1) << tool_call_format_name(format);
    EXPECT_TRUE(whole->calls[0].whole);
    EXPECT_EQ(json::parse(whole->calls[0].arguments), json::parse(R"({"room": "hall", "level": 3})"));
  }
}

// Not forced, or not cut short: what parse_tool_calls says (a broken call is text).
TEST(ToolCallParser, OnlyAForcedCallCutShortIsKeptAsACall) {
  const std::string cut = "{\"name\": \"lights_on\", \"arguments\": {\"room\": \"ha";
  EXPECT_FALSE(parse_answer_calls(ToolCallFormat::kJson, cut, kTools, false).has_value());
  auto unknown = parse_answer_calls(ToolCallFormat::kJson, "{\"name\": \"open_door\", \"arguments\": {", kTools, true);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(unknown->calls.empty() && unknown->content.empty());
}

}  // namespace
}  // namespace hearth::server

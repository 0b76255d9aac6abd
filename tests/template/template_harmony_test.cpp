// gpt-oss's chat template (tests/data/openai-gpt-oss-120b.jinja: OpenAI's chat_template.jinja from the gpt-oss
// model card, as llama.cpp keeps it in models/templates/) renders the harmony format. The expected strings are
// written out by hand from the template's source, piece by piece, so a reader can check each one against it:
//   system:     "<|start|>system<|message|>" + identity + "\nKnowledge cutoff: 2024-06\nCurrent date: " + date +
//               "\n\nReasoning: " + effort + "\n\n# Valid channels: ...message." (+ "\nCalls to these tools ...'."
//               with tools) + "<|end|>"
//   developer:  the first message when it is system or developer ("# Instructions\n\n" + content + "\n\n"), then
//               the tools as a TypeScript namespace; left out when there is neither
//   turns:      user "<|start|>user<|message|>...<|end|>"; an earlier answer "<|start|>assistant<|channel|>final
//               <|message|>...<|end|>" (its analysis dropped); a call "<|start|>assistant to=functions.NAME
//               <|channel|>commentary json<|message|>" + tojson(arguments) + "<|call|>"; its result
//               "<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>" + tojson(content) + "<|end|>"
//   prompt:     "<|start|>assistant"
// template_jinja2_test.cpp checks more conversations byte for byte against Jinja2 itself (the gptoss_* cases).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "template/chat_template.h"

namespace hearth {
namespace {

using Json = nlohmann::ordered_json;

ChatTemplate gpt_oss_template() {
  std::ifstream in(std::string(HEARTH_TEMPLATE_TEST_DIR) + "/../data/openai-gpt-oss-120b.jinja", std::ios::binary);
  std::stringstream source;
  source << in.rdbuf();
  Result<ChatTemplate> t = ChatTemplate::parse(source.str());
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  if (!t.ok()) return ChatTemplate();
  t->set_clock([] { return std::chrono::system_clock::from_time_t(1721995200); });  // 2024-07-26 12:00 UTC
  return std::move(*t);
}

std::string render(const Json& messages, const Json& tools, const Json& extra = Json::object()) {
  Result<std::string> out = gpt_oss_template().render(messages, tools, true, "<|startoftext|>", "<|return|>", extra);
  return out.ok() ? *out : "error: " + out.error().message;
}

constexpr std::string_view kSystemHead =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2024-07-26\n\n";
constexpr std::string_view kChannels =
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
constexpr std::string_view kToolsChannel = "\nCalls to these tools must go to the commentary channel: 'functions'.";

const Json kWeather = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Get the weather", "parameters": {"type": "object", "properties": {
  "city": {"type": "string", "description": "The city name"},
  "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}}, "required": ["city"]}}}])");

TEST(TemplateHarmony, SystemAndUser) {
  const Json messages = Json::parse(R"([{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Hi"}])");
  const std::string expected = std::string(kSystemHead) + "Reasoning: medium\n\n" + std::string(kChannels) +
                               "<|end|>"
                               "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
                               "<|start|>user<|message|>Hi<|end|>"
                               "<|start|>assistant";
  EXPECT_EQ(render(messages, Json(nullptr)), expected);
}

TEST(TemplateHarmony, ToolsAsATypeScriptNamespace) {
  const Json messages = Json::parse(R"([{"role": "user", "content": "Weather in Paris?"}])");
  const std::string expected = std::string(kSystemHead) + "Reasoning: high\n\n" + std::string(kChannels) +
                               std::string(kToolsChannel) +
                               "<|end|>"
                               "<|start|>developer<|message|># Tools\n\n"
                               "## functions\n\n"
                               "namespace functions {\n\n"
                               "// Get the weather\n"
                               "type get_weather = (_: {\n"
                               "// The city name\n"
                               "city: string,\n"
                               "unit?: \"c\" | \"f\", // default: c,\n"
                               "}) => any;\n\n"
                               "} // namespace functions<|end|>"
                               "<|start|>user<|message|>Weather in Paris?<|end|>"
                               "<|start|>assistant";
  EXPECT_EQ(render(messages, kWeather, Json{{"reasoning_effort", "high"}}), expected);
}

// A tool round and an answer: the call's analysis is dropped because a final answer follows it, and so is the
// answer's own; the call's arguments and the tool's result are printed with tojson.
TEST(TemplateHarmony, MultiTurnWithACallAndAnAnswer) {
  const Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "thinking": "Need the tool.", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    {"role": "assistant", "thinking": "Easy.", "content": "It is 18C."},
    {"role": "user", "content": "Thanks"}])");
  const std::string expected =
      std::string(kSystemHead) + "Reasoning: medium\n\n" + std::string(kChannels) + std::string(kToolsChannel) +
      "<|end|>"
      "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Get the weather\n"
      "type get_weather = (_: {\n// The city name\ncity: string,\nunit?: \"c\" | \"f\", // default: c,\n"
      "}) => any;\n\n} // namespace functions<|end|>"
      "<|start|>user<|message|>Weather in Paris?<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>"
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"18C\"<|end|>"
      "<|start|>assistant<|channel|>final<|message|>It is 18C.<|end|>"
      "<|start|>user<|message|>Thanks<|end|>"
      "<|start|>assistant";
  EXPECT_EQ(render(messages, kWeather), expected);
}

// A pending call (no final answer after it yet) keeps its analysis, so the model sees why it called.
TEST(TemplateHarmony, PendingCallKeepsItsAnalysis) {
  const Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "thinking": "Need the tool.", "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"}])");
  const std::string out = render(messages, kWeather);
  EXPECT_NE(out.find("<|start|>user<|message|>Weather?<|end|>"
                     "<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
                     "<|start|>assistant to=functions.get_weather"),
            std::string::npos)
      << out;
  EXPECT_TRUE(out.ends_with("\"18C\"<|end|><|start|>assistant")) << out;
}

TEST(TemplateHarmony, ChannelMarkupInContentIsRefused) {
  const Json messages = Json::parse(R"([{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "<|channel|>final<|message|>Hello"}, {"role": "user", "content": "Again"}])");
  EXPECT_TRUE(render(messages, Json(nullptr)).starts_with("error: You have passed a message containing <|channel|>"));
}

}  // namespace
}  // namespace hearth

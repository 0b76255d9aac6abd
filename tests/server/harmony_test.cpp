// Harmony answers (server/api/harmony.h): where each message's body goes, the same result however the stream is cut,
// the tool calls a response may carry, the chunks and messages the client sees, and gpt-oss's chat formatter.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "server/api/chat.h"
#include "server/anthropic/harmony_messages.h"
#include "server/api/harmony.h"
#include "server/openai/harmony_json.h"
#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "lights_on", "parameters": {"type": "object", "properties": {}}}}
])");

// What a gpt-oss answer looks like after the prompt's "<|start|>assistant" (the stop token is not in the text).
constexpr std::string_view kAnalysisThenFinal =
    "<|channel|>analysis<|message|>The user greets me.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?";
constexpr std::string_view kAnalysisThenCall =
    "<|channel|>analysis<|message|>Need the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"city\": \"Paris\"}";

TEST(Harmony, AnalysisIsReasoningAndFinalIsContent) {
  const HarmonyAnswer a = parse_harmony(kAnalysisThenFinal);
  EXPECT_EQ(a.reasoning, "The user greets me.");
  EXPECT_EQ(a.content, "Hello! How can I help?");
  EXPECT_TRUE(a.calls.empty());
}

TEST(Harmony, CallWithTheRecipientInTheChannelHeader) {
  const HarmonyAnswer a = parse_harmony(kAnalysisThenCall);
  EXPECT_EQ(a.reasoning, "Need the weather.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Paris\"}");
}

// As the template prints a call: the recipient right after the role, before the channel.
TEST(Harmony, CallWithTheRecipientInTheRoleHeader) {
  const HarmonyAnswer a = parse_harmony(
      " to=functions.lights_on<|channel|>commentary json<|message|>{}<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "lights_on");
  EXPECT_EQ(a.calls[0].arguments, "{}");
  EXPECT_EQ(a.calls[1].name, "get_weather");
  EXPECT_EQ(a.calls[1].arguments, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(a.content, "");
}

TEST(Harmony, PreamblesAndStrayCommentaryAreContent) {
  const HarmonyAnswer a = parse_harmony(
      "<|channel|>commentary to=assistant<|channel|>analysis<|message|>Hmm.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking the weather now. <|end|>"
      "<|start|>assistant<|channel|>final<|message|>It is sunny.");
  EXPECT_EQ(a.reasoning, "Hmm.");
  EXPECT_EQ(a.content, "Checking the weather now. It is sunny.");
}

// Built-in tools (browser, python) are not Hearth's to run: their calls reach neither content nor tool_calls.
TEST(Harmony, BuiltInToolCallsAreDropped) {
  const HarmonyAnswer a = parse_harmony(
      "<|channel|>analysis<|message|>Search.<|end|>"
      "<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"}<|call|>");
  EXPECT_EQ(a.reasoning, "Search.");
  EXPECT_EQ(a.content, "");
  EXPECT_TRUE(a.calls.empty());
}

TEST(Harmony, EndMarkersAreDroppedAndCutHeadersTooButNotPlainText) {
  EXPECT_EQ(parse_harmony("<|channel|>final<|message|>Hi<|return|>").content, "Hi");
  const HarmonyAnswer cut = parse_harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|chan");
  EXPECT_EQ(cut.reasoning, "x");
  EXPECT_EQ(cut.content, "");
  // A model that never writes a header (a random synthetic one, or a grammar's output) still answers.
  EXPECT_EQ(parse_harmony("just words").content, "just words");
  EXPECT_EQ(parse_harmony("a <|b|> c").content, "a <|b|> c");
  EXPECT_EQ(parse_harmony("").content, "");
}

TEST(Harmony, TextWithoutAHeaderStreamsOnceItOutgrowsOne) {
  HarmonyParser p;
  const std::string text(HarmonyParser::kMaxHeaderBytes + 20, 'a');
  EXPECT_EQ(p.push(text).content, text);
  EXPECT_EQ(p.push("<|channel|>final<|message|>b").content, "b") << "and harmony after it still parses";
  EXPECT_TRUE(p.finish().empty());
  // A <|message|> beyond kMaxHeaderBytes does not make a header, however the text arrives.
  const std::string late = std::string(HarmonyParser::kMaxHeaderBytes + 1, 'x') + "<|message|>y";
  EXPECT_EQ(parse_harmony(late).content, late);
}

TEST(Harmony, HoldsBackOnlyWhatMayBeAMarker) {
  HarmonyParser p;
  HarmonyDelta d = p.push("<|channel|>final<|message|>Hi <|e");
  EXPECT_EQ(d.content, "Hi ");
  EXPECT_TRUE(p.push("nd|>").empty());
  EXPECT_TRUE(p.finish().empty());

  HarmonyParser q;
  EXPECT_EQ(q.push("<|channel|>final<|message|>a <|").content, "a ");
  EXPECT_EQ(q.push("x").content, "<|x") << "not a marker after all";
  EXPECT_EQ(q.push("<|st").content, "");
  EXPECT_EQ(q.finish().content, "<|st") << "held text is text when the answer ends";
}

HarmonyAnswer parse_in_pieces(std::string_view text, const std::vector<size_t>& cuts) {
  HarmonyParser p;
  HarmonyAnswer a;
  size_t from = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t to = i < cuts.size() ? cuts[i] : text.size();
    const HarmonyDelta d = p.push(text.substr(from, to - from));
    a.content += d.content;
    a.reasoning += d.reasoning;
    from = to;
  }
  const HarmonyDelta rest = p.finish();
  a.content += rest.content;
  a.reasoning += rest.reasoning;
  a.calls = p.calls();
  return a;
}

void expect_same(const HarmonyAnswer& a, const HarmonyAnswer& b, const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t k = 0; k < a.calls.size(); ++k) {
    EXPECT_EQ(a.calls[k].name, b.calls[k].name) << where;
    EXPECT_EQ(a.calls[k].arguments, b.calls[k].arguments) << where;
  }
}

// Stream chunks end anywhere (a token may hold half a marker, a UTF-8 character may span two): every cut into two
// and three pieces, and one byte at a time, gives the whole text's answer.
TEST(Harmony, EveryWayOfCuttingTheStreamGivesTheSameAnswer) {
  const std::string texts[] = {
      std::string(kAnalysisThenFinal),
      std::string(kAnalysisThenCall),
      "<|channel|>commentary to=assistant<|channel|>analysis<|message|>Ça va ?<|end|><|start|>assistant"
      "<|channel|>commentary<|message|>One moment.<|end|><|start|>assistant to=functions.lights_on<|channel|>"
      "commentary json<|message|>{}",
      "plain <| text <|end without a header",
      std::string(HarmonyParser::kMaxHeaderBytes - 4, 'z') + "<|message|>late header",
  };
  for (const std::string& text : texts) {
    const HarmonyAnswer whole = parse_harmony(text);
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    expect_same(parse_in_pieces(text, bytes), whole, "byte by byte: " + text);
    for (size_t i = 0; i <= text.size(); ++i) {
      for (size_t j = i; j <= text.size(); ++j) {
        expect_same(parse_in_pieces(text, {i, j}), whole, "cut at " + std::to_string(i) + ", " + std::to_string(j));
        if (HasFailure()) return;
      }
    }
  }
}

CompletionRequest chat_request(json tools = kTools) {
  CompletionRequest r;
  r.endpoint = Endpoint::kChat;
  r.tools = std::move(tools);
  return r;
}

TEST(HarmonyChoice, CallsThatNameAToolWithObjectArgumentsBecomeToolCalls) {
  const std::vector<HarmonyCall> calls = {{"get_weather", " {\"city\": \"Paris\"} "},
                                          {"unknown_tool", "{}"},
                                          {"lights_on", "not json"},
                                          {"get_weather", "[1]"},
                                          {"lights_on", "{}"}};
  const ChoiceResult r = harmony_choice(chat_request(), "", "Thinking.", calls, FinishReason::kStop, nullptr);
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_TRUE(r.tool_calls[0].id.starts_with("call_"));
  EXPECT_EQ(r.tool_calls[1].name, "lights_on");
  EXPECT_EQ(r.reasoning, "Thinking.");

  CompletionRequest single = chat_request();
  single.parallel_tool_calls = false;
  EXPECT_EQ(harmony_choice(single, "", "", calls, FinishReason::kStop, nullptr).tool_calls.size(), 1u);
  EXPECT_TRUE(harmony_choice(chat_request(json()), "", "", calls, FinishReason::kStop, nullptr).tool_calls.empty())
      << "no tools, no calls";
  EXPECT_TRUE(harmony_choice(chat_request(), "", "", calls, FinishReason::kAborted, nullptr).tool_calls.empty());
}

TEST(HarmonyChoice, ResponseCarriesReasoningContentBesideContent) {
  const CompletionRequest request = chat_request(json());
  const ResponseMeta meta{"chatcmpl-1", 1, "gpt-oss", 0, ""};
  const HarmonyAnswer a = parse_harmony(kAnalysisThenFinal);
  const ChoiceResult c = harmony_choice(request, a.content, a.reasoning, a.calls, FinishReason::kStop, nullptr);
  const json body = response_json(request, meta, std::span(&c, 1), json::object());
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Hello! How can I help?");
  EXPECT_EQ(message["reasoning_content"], "The user greets me.");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");

  const HarmonyAnswer call = parse_harmony(kAnalysisThenCall);
  const ChoiceResult t =
      harmony_choice(chat_request(), call.content, call.reasoning, call.calls, FinishReason::kStop, nullptr);
  const json with_call = response_json(request, meta, std::span(&t, 1), json::object());
  EXPECT_EQ(with_call["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(with_call["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(with_call["choices"][0]["message"]["reasoning_content"], "Need the weather.");
  EXPECT_EQ(with_call["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
}

TEST(HarmonyChoice, StreamChunksCarryReasoningAndContentDeltas) {
  const CompletionRequest request = chat_request(json());
  const ResponseMeta meta{"chatcmpl-1", 1, "gpt-oss", 0, ""};
  const json first = harmony_chunk_json(request, meta, HarmonyDelta{"", "Hmm"}, true, nullptr, 0);
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"reasoning_content", "Hmm"}}));
  const json both = harmony_chunk_json(request, meta, HarmonyDelta{"Hi", "."}, false, nullptr, 0);
  EXPECT_EQ(both["choices"][0]["delta"], (json{{"content", "Hi"}, {"reasoning_content", "."}}));
  const json content = harmony_chunk_json(request, meta, HarmonyDelta{"Hi", ""}, false, nullptr, 0);
  EXPECT_EQ(content["choices"][0]["delta"], (json{{"content", "Hi"}}));
}

TEST(HarmonyTemplate, ReasoningContentBecomesThinking) {
  const json messages = json::parse(R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello", "reasoning_content": "A greeting."},
    {"role": "assistant", "content": "", "reasoning_content": "Need a tool.", "tool_calls": [{"id": "c1",
     "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}])");
  const json out = harmony_template_messages(messages);
  EXPECT_EQ(out[0], messages[0]);
  EXPECT_EQ(out[1]["thinking"], "A greeting.");
  EXPECT_EQ(out[1]["content"], "Hello");
  EXPECT_EQ(out[2]["thinking"], "Need a tool.");
  EXPECT_FALSE(out[2].contains("content")) << "the template refuses content and thinking beside a call";
}

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(HEARTH_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tokenizer load_vocab(const std::string& name) {
  Result<GgufFile> file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/" + name);
  EXPECT_TRUE(file.ok());
  Result<Tokenizer> tokenizer = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tokenizer.ok());
  return std::move(*tokenizer);
}

// gpt-oss's template with its vocabulary speaks harmony; the same template without harmony tokens, or another
// template with them, does not.
TEST(HarmonyTemplate, FormatterDetectsHarmonyAndPassesThinking) {
  const Tokenizer gpt_oss = load_vocab("ggml-vocab-gpt-oss.gguf");
  const Tokenizer llama3 = load_vocab("ggml-vocab-llama-bpe.gguf");
  Result<ChatTemplate> harmony_template = ChatTemplate::parse(read_data("openai-gpt-oss-120b.jinja"));
  ASSERT_TRUE(harmony_template.ok()) << harmony_template.error().message;
  const auto chat = ChatFormatter::create(*harmony_template, gpt_oss);
  EXPECT_TRUE(chat->harmony());
  EXPECT_FALSE(ChatFormatter::create(*harmony_template, llama3)->harmony());
  EXPECT_FALSE(ChatFormatter::create(ChatTemplate::fallback(), gpt_oss)->harmony());

  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "reasoning_content": "Need the tool.", "tool_calls": [{"id": "c1",
     "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"}])");
  Result<std::string> text = chat->render(messages, kTools);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_NE(text->find("<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
                       "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                       "{\"city\": \"Paris\"}<|call|>"),
            std::string::npos)
      << *text;
  EXPECT_TRUE(text->ends_with("<|start|>assistant")) << *text;
  EXPECT_NE(text->find("// \ntype lights_on = () => any;"), std::string::npos) << "a tool without a description";
}

}  // namespace
}  // namespace hearth::server

// Request parsing and validation (table-driven), response and usage rendering, API-key comparison.

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "server/api/chat.h"
#include "server/http/serve_access.h"
#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

struct BadCase {
  const char* name;
  Endpoint endpoint;
  const char* body;
  const char* param;  // expected error param ("" for null)
  const char* message_part;
};

// Bodies too long to write inline: a stop string one byte past kMaxStopBytes (256), and one tool past kMaxTools (128).
const std::string kLongStop = R"({"prompt": "x", "stop": ")" + std::string(257, 'a') + R"("})";
const std::string kLongStopItem =
    R"({"messages": [{"role": "user", "content": "x"}], "stop": ["a", ")" + std::string(300, 'b') + R"("]})";
const std::string kTooManyTools = [] {
  nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", nlohmann::json::array()}};
  for (int i = 0; i < 129; ++i) {
    body["tools"].push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  }
  return body.dump();
}();

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, IsA400NamingTheField) {
  const BadCase& c = GetParam();
  auto result = parse_completion_request(c.body, c.endpoint);
  ASSERT_FALSE(result.ok()) << c.body;
  const ApiError& e = result.error();
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, c.param);
  EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
  const json j = error_json(e);
  EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("type") && j["error"].contains("param") &&
              j["error"].contains("code"));
}

constexpr Endpoint kChat = Endpoint::kChat;
constexpr Endpoint kCompl = Endpoint::kCompletion;

INSTANTIATE_TEST_SUITE_P(
    Table, BadRequestTest,
    ::testing::Values(
        BadCase{"malformed", kChat, R"({"messages": [)", "", "not valid JSON"},
        BadCase{"not_object", kChat, R"([1, 2])", "", "JSON object"},
        BadCase{"missing_messages", kChat, R"({"model": "m"})", "messages", "required"},
        BadCase{"messages_not_array", kChat, R"({"messages": "hi"})", "messages", "must be an array"},
        BadCase{"empty_messages", kChat, R"({"messages": []})", "messages", "at least one"},
        BadCase{"message_not_object", kChat, R"({"messages": [3]})", "messages[0]", "an object"},
        BadCase{"missing_role", kChat, R"({"messages": [{"content": "x"}]})", "messages[0].role", "required"},
        BadCase{"bad_role", kChat, R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role",
                "wizard"},
        BadCase{"bad_content", kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
                "string or an array"},
        BadCase{"image_part", kChat,
                R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
                "messages[0].content[0].type", "only text"},
        BadCase{"missing_prompt", kCompl, R"({"model": "m"})", "prompt", "required"},
        BadCase{"prompt_number", kCompl, R"({"prompt": 5})", "prompt", "string or an array"},
        BadCase{"two_prompts", kCompl, R"({"prompt": ["a", "b"]})", "prompt", "2 prompts"},
        BadCase{"bad_token", kCompl, R"({"prompt": [1, -2]})", "prompt", "token ids"},
        BadCase{"model_type", kCompl, R"({"prompt": "x", "model": 3})", "model", "a string"},
        BadCase{"max_tokens_zero", kCompl, R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "at least 1"},
        BadCase{"max_tokens_negative", kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -5})",
                "max_tokens", "at least 1"},
        BadCase{"max_completion_tokens_zero", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
                "max_completion_tokens", "at least 1"},
        BadCase{"max_tokens_2_pow_63", kCompl, R"({"prompt": "x", "max_tokens": 9223372036854775808})", "max_tokens",
                "'max_tokens' is 9223372036854775808, above the maximum 2147483647"},
        BadCase{"max_completion_tokens_2_pow_64_minus_1", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 18446744073709551615})",
                "max_completion_tokens", "'max_completion_tokens' is 18446744073709551615, above the maximum"},
        BadCase{"max_tokens_string", kCompl, R"({"prompt": "x", "max_tokens": "9"})", "max_tokens", "an integer"},
        BadCase{"max_tokens_float", kCompl, R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens", "an integer"},
        BadCase{"n_zero", kCompl, R"({"prompt": "x", "n": 0})", "n", "[1, 16]"},
        BadCase{"n_too_many", kChat, R"({"messages": [{"role": "user", "content": "x"}], "n": 17})", "n", "maximum 16"},
        BadCase{"temperature_high", kCompl, R"({"prompt": "x", "temperature": 3})", "temperature", "range"},
        BadCase{"temperature_type", kCompl, R"({"prompt": "x", "temperature": "hot"})", "temperature", "a number"},
        BadCase{"top_p_zero", kCompl, R"({"prompt": "x", "top_p": 0})", "top_p", "greater than 0"},
        BadCase{"seed_type", kCompl, R"({"prompt": "x", "seed": "s"})", "seed", "an integer"},
        BadCase{"stop_type", kCompl, R"({"prompt": "x", "stop": 7})", "stop", "string or an array"},
        BadCase{"stop_item_type", kCompl, R"({"prompt": "x", "stop": ["a", 1]})", "stop", "string or an array"},
        BadCase{"stop_too_long", kCompl, kLongStop.c_str(), "stop",
                "a string of 257 bytes; at most 256 bytes are allowed"},
        BadCase{"stop_item_too_long", kChat, kLongStopItem.c_str(), "stop",
                "a string of 300 bytes; at most 256 bytes are allowed"},
        BadCase{"too_many_tools", kChat, kTooManyTools.c_str(), "tools", "'tools' has 129 tools; at most 128"},
        BadCase{"stream_type", kCompl, R"({"prompt": "x", "stream": "yes"})", "stream", "a boolean"},
        BadCase{"include_usage_type", kCompl,
                R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
                "stream_options.include_usage", "a boolean"},
        BadCase{"salt_type", kCompl, R"({"prompt": "x", "cache_salt": 1})", "cache_salt", "a string"},
        BadCase{"hearth_type", kCompl, R"({"prompt": "x", "hearth": []})", "hearth", "an object"},
        BadCase{"pin_type", kCompl, R"({"prompt": "x", "hearth": {"pin_prefix": "yes"}})", "pin_prefix", "a boolean"},
        BadCase{"chat_logprobs_type", kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})",
                "logprobs", "a boolean"},
        BadCase{"top_logprobs_high", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})",
                "top_logprobs", "maximum 20"},
        BadCase{"top_logprobs_negative", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": -1})",
                "top_logprobs", "[0, 20]"},
        BadCase{"top_logprobs_without_logprobs", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs",
                "requires 'logprobs': true"},
        BadCase{"completion_logprobs_high", kCompl, R"({"prompt": "x", "logprobs": 6})", "logprobs", "maximum 5"},
        BadCase{"completion_logprobs_bool", kCompl, R"({"prompt": "x", "logprobs": true})", "logprobs", "an integer"},
        BadCase{"logit_bias_range", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 101}})", "logit_bias",
                "[-100, 100]"},
        BadCase{"logit_bias_key", kCompl, R"({"prompt": "x", "logit_bias": {"five": 1}})", "logit_bias",
                "not a token id"},
        BadCase{"frequency_penalty", kCompl, R"({"prompt": "x", "frequency_penalty": 2.5})", "frequency_penalty",
                "[-2, 2]"},
        BadCase{"presence_penalty", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": -3})", "presence_penalty",
                "[-2, 2]"},
        BadCase{"min_p", kCompl, R"({"prompt": "x", "min_p": 1.5})", "min_p", "[0, 1]"},
        BadCase{"repeat_penalty_zero", kCompl, R"({"prompt": "x", "repeat_penalty": 0})", "repeat_penalty",
                "greater than 0"},
        BadCase{"repeat_last_n", kCompl, R"({"prompt": "x", "repeat_last_n": -2})", "repeat_last_n", "-1"},
        BadCase{"suffix", kCompl, R"({"prompt": "x", "suffix": "end"})", "suffix", "not supported"},
        BadCase{"response_format_not", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                    "json_schema": {"name": "n", "schema": {"type": "string", "not": {"const": "a"}}}}})",
                "response_format.json_schema.schema", "'not'"},
        BadCase{"response_format_anyof", kCompl,
                R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema":
                    {"type": "object", "properties": {"a": {"anyOf": []}}}}}})",
                "response_format.json_schema.schema", "'schema.properties.a.anyOf' must be a non-empty array"},
        BadCase{"response_format_type", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})",
                "response_format.type", "json_schema"},
        BadCase{"response_format_no_schema", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
                    "json_schema": {"name": "n"}}})",
                "response_format.json_schema.schema", "required"},
        BadCase{"tool_choice_without_tools", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice",
                "no tools"},
        BadCase{"tool_choice_unknown_function", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function":
                    {"name": "a"}}], "tool_choice": {"type": "function", "function": {"name": "b"}}})",
                "tool_choice", "\"b\""},
        BadCase{"tool_choice_with_json_format", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function":
                    {"name": "a"}}], "tool_choice": "required", "response_format": {"type": "json_object"}})",
                "response_format", "cannot be combined"},
        BadCase{"tool_without_name", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]})",
                "tools[0].function.name", "required"},
        BadCase{
            "tool_call_without_name", kChat,
            R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "function": {}}]}]})",
            "messages[0].tool_calls[0].function.name", "required"},
        BadCase{"functions", kChat, R"({"messages": [{"role": "user", "content": "x"}], "functions": []})", "functions",
                "deprecated"},
        BadCase{"audio_modality", kChat,
                R"({"messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]})", "modalities",
                "only text"},
        BadCase{"completion_logprobs_echo", kCompl, R"({"prompt": "x", "logprobs": 1, "echo": true})", "logprobs",
                "echo"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ParseRequest, PenaltiesAndLogitBiasAreRead) {
  auto result = parse_completion_request(
      R"({"prompt": "x", "frequency_penalty": 0.5, "presence_penalty": -1, "logit_bias": {"7": -100, "3": 2.5}})",
      Endpoint::kCompletion);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const CompletionRequest& r = *result;
  EXPECT_FLOAT_EQ(r.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.presence_penalty, -1.0f);
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, 2.5f}, {7, -100.0f}}));
  EXPECT_FLOAT_EQ(r.min_p, 0.0f);  // llama.cpp's extensions, off unless asked for
  EXPECT_FLOAT_EQ(r.repeat_penalty, 1.0f);
  auto llama = parse_completion_request(R"({"prompt": "x", "min_p": 0.05, "repeat_penalty": 1.1, "repeat_last_n": -1})",
                                        Endpoint::kCompletion);
  ASSERT_TRUE(llama.ok()) << llama.error().message;
  EXPECT_FLOAT_EQ(llama->min_p, 0.05f);
  EXPECT_FLOAT_EQ(llama->repeat_penalty, 1.1f);
  EXPECT_EQ(llama->repeat_last_n, -1);
}

TEST(ParseRequest, SpeculativeModesAreReadAndUnknownOnesRefused) {
  auto unset = parse_completion_request(R"({"prompt": "x"})", Endpoint::kCompletion);
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->speculative.has_value()) << "unset: the server's default";
  auto named = parse_completion_request(R"({"prompt": "x", "speculative": "auto"})", Endpoint::kCompletion);
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->speculative->mode, SpeculativeMode::kAuto);
  auto object = parse_completion_request(R"({"prompt": "x", "hearth": {"speculative": {"max_draft": 4}}})",
                                         Endpoint::kCompletion);
  ASSERT_TRUE(object.ok()) << object.error().message;
  EXPECT_EQ(object->speculative->mode, SpeculativeMode::kPromptLookup);
  EXPECT_EQ(object->speculative->max_draft, 4);
  auto off = parse_completion_request(R"({"messages": [{"role": "user", "content": "hi"}],
                                          "speculative": {"mode": "off"}})",
                                      Endpoint::kChat);
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(off->speculative->mode, SpeculativeMode::kOff);
  for (const char* bad : {R"("medusa")", R"({"mode": "eagle"})", R"({"max_draft": 0})", R"({"max_draft": 33})",
                          R"({"mode": "auto", "k": 3})", R"(3)", R"({"mode": 1})"}) {
    auto r =
        parse_completion_request(std::string(R"({"prompt": "x", "speculative": )") + bad + "}", Endpoint::kCompletion);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
    EXPECT_NE(r.error().param.find("speculative"), std::string::npos) << bad << ": " << r.error().param;
  }
}

TEST(ParseRequest, PredictionContentIsReadAndMalformedOnesRefused) {
  constexpr const char* kChat = R"({"messages": [{"role": "user", "content": "hi"}], "prediction": )";
  auto text = parse_completion_request(std::string(kChat) + R"({"type": "content", "content": "a = 1"}})",
                                       Endpoint::kChat);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_TRUE(text->has_prediction);
  EXPECT_EQ(text->prediction_text, "a = 1");
  auto parts = parse_completion_request(
      std::string(kChat) +
          R"({"type": "content", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}})",
      Endpoint::kChat);
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  EXPECT_EQ(parts->prediction_text, "ab");
  auto none = parse_completion_request(std::string(kChat) + "null}", Endpoint::kChat);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_prediction);
  const std::string huge = R"({"type": "content", "content": ")" + std::string(kMaxPredictionBytes + 1, 'x') + "\"}";
  for (const std::string& bad : std::vector<std::string>{R"("text")", R"({"type": "text", "content": "x"})", R"({"content": "x"})",
                                R"({"type": "content"})", R"({"type": "content", "content": 3})",
                                R"({"type": "content", "content": [{"type": "image_url"}]})",
                                R"({"type": "content", "content": "x", "extra": 1})", huge}) {
    auto r = parse_completion_request(std::string(kChat) + bad + "}", Endpoint::kChat);
    ASSERT_FALSE(r.ok()) << bad.substr(0, 80);
    EXPECT_EQ(r.error().status, 400);
    EXPECT_NE(r.error().param.find("prediction"), std::string::npos) << r.error().param;
  }
}

TEST(ParseRequest, ChatFieldsAndDefaults) {
  auto result = parse_completion_request(R"({
      "model": "stories260K",
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}],
      "max_completion_tokens": 12, "temperature": 0, "top_p": 0.5, "seed": 7, "stop": "\n",
      "stream": true, "stream_options": {"include_usage": true},
      "cache_salt": "tenant-a", "hearth": {"pin_prefix": true}, "cache_prompt": false, "n": 1})",
                                         Endpoint::kChat);
  ASSERT_TRUE(result.ok()) << result.error().message;
  const auto& r = *result;
  EXPECT_EQ(r.model, "stories260K");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "Hello");
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.cache_salt, "tenant-a");
  EXPECT_TRUE(r.pin_prefix);
  EXPECT_FALSE(r.use_cache);
}

TEST(ParseRequest, ChatTemplateKwargsAreAnObjectThatCannotOverrideTheServersVariables) {
  const char* kMessages = R"("messages": [{"role": "user", "content": "Hi"}])";
  auto ok = parse_completion_request(
      fmt::format(R"({{{}, "chat_template_kwargs": {{"enable_thinking": false}}}})", kMessages), Endpoint::kChat);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->chat_template_kwargs, (json{{"enable_thinking", false}}));
  auto not_object =
      parse_completion_request(fmt::format(R"({{{}, "chat_template_kwargs": [1]}})", kMessages), Endpoint::kChat);
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().param, "chat_template_kwargs");
  auto reserved = parse_completion_request(
      fmt::format(R"({{{}, "chat_template_kwargs": {{"add_generation_prompt": false}}}})", kMessages), Endpoint::kChat);
  ASSERT_FALSE(reserved.ok());
  EXPECT_EQ(reserved.error().param, "chat_template_kwargs.add_generation_prompt");
}

// The variables reach the model's own template: Qwen 3's enable_thinking=false writes an empty think block.
TEST(ChatFormatter, PassesTemplateKwargsToTheModelsTemplate) {
  auto file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tokenizer = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  std::string warning;
  auto chat = ChatFormatter::create(ChatTemplate::from_gguf(*file, &warning), *tokenizer);
  ASSERT_TRUE(warning.empty()) << warning;
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  auto thinking = chat->render(messages, nullptr);
  auto not_thinking = chat->render(messages, nullptr, json{{"enable_thinking", false}});
  ASSERT_TRUE(thinking.ok() && not_thinking.ok());
  EXPECT_EQ(thinking->find("<think>"), std::string::npos) << *thinking;
  EXPECT_NE(not_thinking->find("<think>\n\n</think>"), std::string::npos) << *not_thinking;
}

std::unique_ptr<ChatFormatter> vocab_chat(const char* name, std::unique_ptr<Tokenizer>& tokenizer) {
  auto file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/" + name);
  EXPECT_TRUE(file.ok()) << file.error().message;
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
  return ChatFormatter::create(ChatTemplate::from_gguf(*file, nullptr), *tokenizer);
}

// A template that knows no tools (Gemma 3's, Llama 3.0's): the catalogue goes into the system prompt (Gemma folds
// it into the first user turn), calls and results become text, and the answer format is JSON calls. A chat without
// tools renders exactly as before.
TEST(ChatFormatter, TemplatesWithoutToolsGetTheGenericToolPrompt) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "lights_on", "description": "Lights",
    "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}}])");
  const json chat = json::parse(R"([{"role": "user", "content": "Light the hall"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "lights_on", "arguments": {"room": "hall"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    {"role": "user", "content": "Thanks"}])");
  for (const char* vocab : {"ggml-vocab-gemma3.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-phi-3.gguf"}) {
    std::unique_ptr<Tokenizer> tokenizer;
    auto formatter = vocab_chat(vocab, tokenizer);
    EXPECT_EQ(formatter->tool_call_format(), ToolCallFormat::kJson) << vocab;
    auto text = formatter->render(chat, tools);
    ASSERT_TRUE(text.ok()) << vocab << ": " << text.error().message;
    const size_t catalogue = text->find(R"({"name":"lights_on","description":"Lights","parameters":)");
    const size_t question = text->find("Light the hall");
    EXPECT_NE(catalogue, std::string::npos) << *text;
    EXPECT_LT(catalogue, question) << *text;
    EXPECT_NE(text->find(R"({"name":"lights_on","arguments":{"room":"hall"}})"), std::string::npos) << *text;
    EXPECT_NE(text->find("Result of lights_on: done\n\nThanks"), std::string::npos) << *text;
    // Without anything of tools, the template's own rendering, untouched.
    const json plain = json::array({{{"role", "user"}, {"content", "Hi"}},
                                    {{"role", "assistant"}, {"content", "Yo"}},
                                    {{"role", "user"}, {"content", "Bye"}}});
    std::string warning;
    auto file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/" + vocab);
    const ChatTemplate tmpl = ChatTemplate::from_gguf(*file, &warning);
    auto direct = tmpl.render(plain, nullptr, true, std::string(tokenizer->token_text(tokenizer->bos())),
                              std::string(tokenizer->token_text(tokenizer->eos())), {});
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(*formatter->render(plain, nullptr), *direct) << vocab;
  }
  // Qwen's template has tools: it renders them itself, in its Hermes format.
  std::unique_ptr<Tokenizer> tokenizer;
  auto qwen = vocab_chat("ggml-vocab-qwen2.gguf", tokenizer);
  EXPECT_EQ(qwen->tool_call_format(), ToolCallFormat::kHermes);
  auto text = qwen->render(chat, tools);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("You can call tools"), std::string::npos);
  EXPECT_NE(text->find("<tools>"), std::string::npos);
}

TEST(ParseRequest, ParallelToolCallsFalseKeepsTheFirstCall) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  auto parsed = parse_completion_request(
      fmt::format(R"({{"messages": [{{"role": "user", "content": "x"}}], {}, "parallel_tool_calls": false}})", tools),
      Endpoint::kChat);
  ASSERT_TRUE(parsed.ok());
  CompletionRequest& r = *parsed;
  EXPECT_FALSE(r.parallel_tool_calls);
  const std::string two = R"([{"name": "f", "arguments": {"a": 1}}, {"name": "f", "arguments": {"a": 2}}])";
  ChoiceResult one = choice_with_tool_calls(r, ToolCallFormat::kJson, two, FinishReason::kStop, nullptr);
  ASSERT_EQ(one.tool_calls.size(), 1u);
  EXPECT_EQ(one.tool_calls[0].arguments, R"({"a":1})");
  r.parallel_tool_calls = true;
  EXPECT_EQ(choice_with_tool_calls(r, ToolCallFormat::kJson, two, FinishReason::kStop, nullptr).tool_calls.size(), 2u);
  auto bad = parse_completion_request(
      fmt::format(R"({{"messages": [{{"role": "user", "content": "x"}}], {}, "parallel_tool_calls": "no"}})", tools),
      Endpoint::kChat);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "parallel_tool_calls");
}

TEST(ParseRequest, LogprobsAskForThatManyAlternatives) {
  auto top = [](Endpoint endpoint, const char* body) {
    auto r = parse_completion_request(body, endpoint);
    EXPECT_TRUE(r.ok()) << body;
    return r->top_logprobs;
  };
  EXPECT_EQ(top(kChat, R"({"messages": [{"role": "user", "content": "x"}]})"), std::nullopt);
  EXPECT_EQ(top(kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false})"), std::nullopt);
  EXPECT_EQ(top(kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})"), 0);
  EXPECT_EQ(top(kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 20})"),
            20);
  EXPECT_EQ(top(kCompl, R"({"prompt": "x"})"), std::nullopt);
  EXPECT_EQ(top(kCompl, R"({"prompt": "x", "logprobs": 0})"), 0);
  EXPECT_EQ(top(kCompl, R"({"prompt": "x", "logprobs": 5})"), 5);
}

TEST(ParseRequest, NeutralValuesOfRefusedFieldsAndIgnoredFieldsAreAccepted) {
  for (const char* body : {
           R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {}, "frequency_penalty": 0,
               "presence_penalty": 0.0, "response_format": {"type": "text"}, "tool_choice": "auto",
               "modalities": ["text"], "user": "u-1", "metadata": {"k": "v"}, "store": false,
               "parallel_tool_calls": true, "service_tier": "auto", "audio": null})",
           R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none"})",
       }) {
    EXPECT_TRUE(parse_completion_request(body, kChat).ok()) << body;
  }
  EXPECT_TRUE(parse_completion_request(R"({"prompt": "x", "suffix": "", "logit_bias": {}, "user": "u"})", kCompl).ok());
}

TEST(Render, UsageOfSeveralChoicesCountsThePromptOnceAndEveryComputedPromptToken) {
  RequestUsage first;
  first.prompt_tokens = 40;
  first.completion_tokens = 5;
  first.cached_tokens = 0;
  RequestUsage other = first;
  other.cached_tokens = 32;
  other.completion_tokens = 7;
  const std::vector<RequestUsage> choices = {first, other, other};
  const json u = usage_json(choices, CompletionRequest{});
  EXPECT_EQ(u["prompt_tokens"], 40);
  EXPECT_EQ(u["completion_tokens"], 19);
  EXPECT_EQ(u["total_tokens"], 59);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(u["hearth"]["computed_prompt_tokens"], 40 + 8 + 8);
  ASSERT_EQ(u["hearth"]["choices"].size(), 3u);
  EXPECT_EQ(u["hearth"]["choices"][2],
            json({{"index", 2}, {"reused_tokens", 32}, {"computed_prompt_tokens", 8}, {"completion_tokens", 7}}));
  EXPECT_FALSE(usage_json(std::span(choices).first(1), CompletionRequest{})["hearth"].contains("choices"));
}

TEST(Render, SeveralChoicesAreIndexed) {
  CompletionRequest r;
  r.endpoint = Endpoint::kChat;
  const std::vector<ChoiceResult> choices = {{"a", FinishReason::kStop, nullptr},
                                             {"b", FinishReason::kLength, nullptr}};
  const json j = response_json(r, ResponseMeta{"chatcmpl-1", 1, "m"}, choices, json::object());
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["message"]["content"], "b");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(chunk_json(r, ResponseMeta{"c", 1, "m"}, "x", true, FinishReason::kNone, nullptr, 3)["choices"][0]["index"],
            3);
}

TEST(ParseRequest, CompletionPromptForms) {
  struct Case {
    const char* body;
    bool is_tokens;
    std::string text;
    std::vector<int32_t> tokens;
  };
  const Case cases[] = {
      {R"({"prompt": "Once"})", false, "Once", {}},
      {R"({"prompt": ["Once"]})", false, "Once", {}},
      {R"({"prompt": ""})", false, "", {}},
      {R"({"prompt": [1, 403, 407]})", true, "", {1, 403, 407}},
      {R"({"prompt": [[1, 403]]})", true, "", {1, 403}},
  };
  for (const Case& c : cases) {
    auto result = parse_completion_request(c.body, Endpoint::kCompletion);
    ASSERT_TRUE(result.ok()) << c.body;
    const auto& r = *result;
    EXPECT_EQ(r.prompt_is_tokens, c.is_tokens) << c.body;
    EXPECT_EQ(r.prompt_text, c.text) << c.body;
    EXPECT_EQ(r.prompt_tokens, c.tokens) << c.body;
    EXPECT_FALSE(r.max_tokens.has_value());
    EXPECT_TRUE(r.use_cache);
    EXPECT_FALSE(r.stream);
  }
}

TEST(Render, UsageHasCachedTokensAndHearthExtension) {
  RequestUsage u;
  u.prompt_tokens = 100;
  u.completion_tokens = 7;
  u.cached_tokens = 96;
  u.copied_tokens = 0;
  u.prefill_ms = 1.5;
  u.ttft_ms = 2.5;
  u.total_ms = 9;
  CompletionRequest r;
  const json j = usage_json(u, r);
  EXPECT_EQ(j["prompt_tokens"], 100);
  EXPECT_EQ(j["completion_tokens"], 7);
  EXPECT_EQ(j["total_tokens"], 107);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 96);
  EXPECT_EQ(j["hearth"]["reused_tokens"], 96);
  EXPECT_EQ(j["hearth"]["computed_prompt_tokens"], 4);
  EXPECT_EQ(j["hearth"]["reuse_stopped_at"], 96);
  EXPECT_EQ(j["hearth"]["prefill_ms"], 1.5);
  EXPECT_EQ(j["hearth"]["ttft_ms"], 2.5);
  EXPECT_EQ(j["hearth"]["cache"], "on");
  EXPECT_FALSE(j["hearth"].contains("pinned_tokens"));

  r.pin_prefix = true;
  u.pinned_tokens = 96;
  EXPECT_EQ(usage_json(u, r)["hearth"]["pinned_tokens"], 96);
  EXPECT_TRUE(usage_json(u, r)["hearth"]["pin_error"].is_null());
}

TEST(Render, UsageExplainsWhereReuseStopped) {
  RequestUsage u;
  u.prompt_tokens = 40;
  u.cached_tokens = 5;
  u.reuse = ReuseExplanation{ReuseStop::kDiverged, 5, 0, 16, "<s> Once", " 08:00", " upon", -1, 0};
  const json h = usage_json(u, CompletionRequest{})["hearth"];
  EXPECT_EQ(h["reuse_stopped_at"], 5);
  EXPECT_EQ(h["reuse_stop_reason"], "diverged");
  EXPECT_EQ(h["reuse_stop"], (json{{"block", 0},
                                   {"block_size", 16},
                                   {"context_text", "<s> Once"},
                                   {"prompt_text", " 08:00"},
                                   {"cached_text", " upon"}}));
  u.reuse = ReuseExplanation{ReuseStop::kEvicted, 32, 2, 16, "a", "b", "", 2, 0};
  EXPECT_EQ(usage_json(u, CompletionRequest{})["hearth"]["reuse_stop"]["evicted_block"], 2);
  u.reuse = ReuseExplanation{};  // never admitted (aborted while waiting)
  const json none = usage_json(u, CompletionRequest{})["hearth"];
  EXPECT_TRUE(none["reuse_stop_reason"].is_null());
  EXPECT_FALSE(none.contains("reuse_stop"));
}

TEST(Render, UsageTiersSplitReusedTokensByTheTierTheyCameFrom) {
  RequestUsage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 96;
  u.tier.found_tokens = 80;
  u.tier.found_tokens_redis = 48;
  u.tier.load = true;
  u.tier.loaded_tokens = 80;
  u.tier.loaded_tokens_redis = 48;
  const json h = usage_json(u, CompletionRequest{})["hearth"];
  EXPECT_EQ(h["tiers"], (json{{"ram", 16}, {"disk", 32}, {"redis", 48}}));
  EXPECT_EQ(h["tier_load"]["tier"], "disk+redis");
  EXPECT_EQ(h["tier_load"]["loaded_tokens"], 80);
  u.tier.found_tokens = 48;
  EXPECT_EQ(usage_json(u, CompletionRequest{})["hearth"]["tier_load"]["tier"], "redis");
}

TEST(Render, CacheReportHasTiersAndReason) {
  CacheReport r;
  r.prompt_tokens = 100;
  r.cached_tokens = 64;
  r.cached_tokens_ram = 64;
  r.reusable_tokens = 64;
  r.explanation = ReuseExplanation{ReuseStop::kDifferentSalt, 0, 0, 16, "", "<s> Once", "", -1, 99};
  const json j = cache_report_json(r, "m");
  EXPECT_EQ(j["object"], "cache.explanation");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["cached_tokens"], 64);
  EXPECT_EQ(j["tiers"], (json{{"ram", 64}, {"disk", 0}}));
  EXPECT_EQ(j["reuse_stop_reason"], "different_salt");
  EXPECT_EQ(j["reuse_stop"]["other_salt_tokens"], 99);
  EXPECT_EQ(j["reuse_stop"]["prompt_text"], "<s> Once");
}

TEST(Render, ZeroCachedTokensIsStillPresent) {
  RequestUsage u;
  u.prompt_tokens = 5;
  const json j = usage_json(u, CompletionRequest{});
  ASSERT_TRUE(j["prompt_tokens_details"].contains("cached_tokens"));
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(Render, ChatResponseAndChunks) {
  CompletionRequest r;
  r.endpoint = Endpoint::kChat;
  r.include_usage = true;
  const ResponseMeta meta{"chatcmpl-1", 123, "m"};
  RequestUsage u;
  const json whole = response_json(r, meta, "Hi", FinishReason::kLength, u);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");

  const json first = chunk_json(r, meta, "H", true, FinishReason::kNone);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "H");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());

  const json last = chunk_json(r, meta, "", false, FinishReason::kStop);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());

  const json usage = usage_chunk_json(r, meta, u);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(Render, CompletionChunkHasText) {
  CompletionRequest r;
  const json c = chunk_json(r, ResponseMeta{"cmpl-1", 1, "m"}, "abc", true, FinishReason::kNone);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "abc");
  EXPECT_FALSE(c.contains("usage"));
}

TEST(Auth, BearerMatchesExactly) {
  EXPECT_TRUE(bearer_matches("Bearer sk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-2", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-12", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-", "sk-1"));
  EXPECT_FALSE(bearer_matches("", "sk-1"));
  EXPECT_FALSE(bearer_matches("sk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("Basic sk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearersk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-1 ", "sk-1"));
}

// RFC 7235 section 2.1: the auth-scheme is case-insensitive, and 1*SP separates it from the credentials.
TEST(Auth, BearerSchemeIsCaseInsensitive) {
  for (const char* header : {"bearer sk-1", "BEARER sk-1", "BeArEr sk-1", "Bearer  sk-1"}) {
    EXPECT_TRUE(bearer_matches(header, "sk-1")) << header;
  }
  EXPECT_FALSE(bearer_matches("bearer sk-2", "sk-1"));
  EXPECT_FALSE(bearer_matches("bearer  ", "sk-1"));
}

}  // namespace
}  // namespace hearth::server

// The Ollama wire format: chat and generate bodies into the neutral request (defaults, options, format, tools,
// messages), what is refused with a 400 naming it, and the chunks, final object, stats and model entries.
#include "server/ollama/ollama_json.h"

#include <gtest/gtest.h>

namespace hearth::server {
namespace {

using nlohmann::json;

OllamaRequest chat_ok(const json& body) {
  auto r = validate_ollama_chat(body);
  if (!r) ADD_FAILURE() << r.error().message;
  return std::move(r).value();
}

OllamaRequest generate_ok(const json& body) {
  auto r = validate_ollama_generate(body);
  if (!r) ADD_FAILURE() << r.error().message;
  return std::move(r).value();
}

ApiError chat_error(const json& body) {
  auto r = validate_ollama_chat(body);
  EXPECT_FALSE(r.ok()) << body.dump();
  return r.ok() ? ApiError{} : r.error();
}

const json kHello = json::array({{{"role", "user"}, {"content", "Hello"}}});

TEST(OllamaJson, ChatTakesOllamasDefaultsAndStreams) {
  const OllamaRequest r = chat_ok({{"model", "llama3.2:latest"}, {"messages", kHello}});
  EXPECT_FALSE(r.generate);
  EXPECT_EQ(r.model, "llama3.2:latest");
  EXPECT_EQ(r.chat.model, "llama3.2");  // the tag is Ollama's spelling, not part of the id
  EXPECT_EQ(r.chat.endpoint, Endpoint::kChat);
  EXPECT_TRUE(r.chat.stream);
  EXPECT_FLOAT_EQ(r.chat.temperature, kOllamaDefaultTemperature);
  EXPECT_EQ(r.chat.top_k, kOllamaDefaultTopK);
  EXPECT_FLOAT_EQ(r.chat.top_p, kOllamaDefaultTopP);
  EXPECT_FALSE(r.chat.max_tokens);
  EXPECT_FALSE(r.num_ctx);
  EXPECT_FALSE(r.load_only);
  EXPECT_EQ(r.chat.messages, json::parse(R"([{"role": "user", "content": "Hello"}])"));
}

TEST(OllamaJson, OptionsMapOntoTheSampler) {
  const OllamaRequest r = chat_ok({{"model", "m"},
                                   {"messages", kHello},
                                   {"stream", false},
                                   {"options",
                                    {{"temperature", 0},
                                     {"top_k", 5},
                                     {"top_p", 0.5},
                                     {"seed", 42},
                                     {"num_predict", 7},
                                     {"stop", {"END", ""}},
                                     {"num_ctx", 2048},
                                     {"presence_penalty", 0.5},
                                     {"frequency_penalty", -0.5},
                                     {"min_p", 0.05},
                                     {"repeat_penalty", 1.1},
                                     {"num_thread", 8},
                                     {"repeat_last_n", 32}}}});
  EXPECT_FALSE(r.chat.stream);
  EXPECT_FLOAT_EQ(r.chat.temperature, 0.0f);
  EXPECT_EQ(r.chat.top_k, 5);
  EXPECT_FLOAT_EQ(r.chat.top_p, 0.5f);
  EXPECT_EQ(r.chat.seed, 42u);
  EXPECT_EQ(r.chat.max_tokens, 7);
  EXPECT_EQ(r.chat.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.num_ctx, 2048);
  EXPECT_FLOAT_EQ(r.chat.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.chat.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.chat.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.chat.repeat_penalty, 1.1f);
  EXPECT_EQ(r.chat.repeat_last_n, 32);
}

TEST(OllamaJson, NumPredictMinusOneOrTwoIsUntilTheContextIsFull) {
  for (int n : {-1, -2}) {
    const OllamaRequest r = chat_ok({{"model", "m"}, {"messages", kHello}, {"options", {{"num_predict", n}}}});
    EXPECT_FALSE(r.chat.max_tokens) << n;
  }
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"num_predict", 0}}}}).param,
            "options.num_predict");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"num_predict", -3}}}}).param,
            "options.num_predict");
}

TEST(OllamaJson, StagesTheEngineLacksAreRefusedAwayFromTheirNeutralValue) {
  const std::pair<const char*, json> cases[] = {{"mirostat", 2}, {"tfs_z", 0.9}, {"typical_p", 0.5}};
  for (const auto& [key, value] : cases) {
    const ApiError e = chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{key, value}}}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, std::string("options.") + key);
    EXPECT_NE(e.message.find(key), std::string::npos) << e.message;
  }
}

TEST(OllamaJson, RepetitionOptionsOutOfRangeNameTheOption) {
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"min_p", 1.5}}}}).param, "options.min_p");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"repeat_penalty", 0}}}}).param,
            "options.repeat_penalty");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"repeat_last_n", -2}}}}).param,
            "options.repeat_last_n");
}

TEST(OllamaJson, UnknownFieldsAndOptionsAreRefusedNotIgnored) {
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"num_gqa", 8}}}}).param, "options.num_gqa");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"raw", true}}).param, "raw");  // generate's only
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", {{"top_k", "many"}}}}).param,
            "options.top_k");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"options", 3}}).param, "options");
  EXPECT_EQ(chat_error({{"messages", kHello}}).param, "model");
  EXPECT_EQ(
      chat_error({{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}}}}).param,
      "messages[0].images");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "x"}, {"name", "bob"}}}}}).param,
            "messages[0].name");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"logprobs", true}}).param, "logprobs");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"keep_alive", "soon"}}).param, "keep_alive");
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"think", "very"}}).param, "think");
}

TEST(OllamaJson, KeepAliveIsValidatedAndAccepted) {
  for (const json& k : {json("5m"), json("1h30m"), json("-1"), json(0), json(-1), json(300.5)}) {
    EXPECT_TRUE(validate_ollama_chat({{"model", "m"}, {"messages", kHello}, {"keep_alive", k}}).ok()) << k.dump();
  }
}

TEST(OllamaJson, KeepAliveIsMilliseconds) {
  EXPECT_EQ(ollama_keep_alive_ms("5m"), 300'000);
  EXPECT_EQ(ollama_keep_alive_ms("1h30m"), 5'400'000);
  EXPECT_EQ(ollama_keep_alive_ms("300ms"), 300);
  EXPECT_EQ(ollama_keep_alive_ms("1.5s"), 1'500);
  EXPECT_EQ(ollama_keep_alive_ms("0"), 0);
  EXPECT_EQ(ollama_keep_alive_ms("300"), 300'000);  // a bare number: seconds
  EXPECT_EQ(ollama_keep_alive_ms(json(60)), 60'000);
  EXPECT_EQ(ollama_keep_alive_ms(json(0)), 0);
  EXPECT_EQ(ollama_keep_alive_ms(json(-1)), kKeepAliveForever);
  EXPECT_EQ(ollama_keep_alive_ms("-1m"), kKeepAliveForever);
  EXPECT_EQ(ollama_keep_alive_ms("-1"), kKeepAliveForever);
  EXPECT_EQ(ollama_keep_alive_ms("100000h"), kKeepAliveForever);
  for (const char* bad : {"", "soon", "5x", "m", "5m3", "--1", "1e9"}) EXPECT_FALSE(ollama_keep_alive_ms(bad)) << bad;
  EXPECT_FALSE(ollama_keep_alive_ms(json::array()));
  EXPECT_EQ(chat_ok({{"model", "m"}, {"messages", kHello}, {"keep_alive", "10m"}}).keep_alive_ms, 600'000);
}

TEST(OllamaJson, FormatJsonOrASchemaCompilesAGrammar) {
  EXPECT_FALSE(chat_ok({{"model", "m"}, {"messages", kHello}}).chat.grammar);
  EXPECT_FALSE(chat_ok({{"model", "m"}, {"messages", kHello}, {"format", ""}}).chat.grammar);
  EXPECT_TRUE(chat_ok({{"model", "m"}, {"messages", kHello}, {"format", "json"}}).chat.grammar);
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  EXPECT_TRUE(chat_ok({{"model", "m"}, {"messages", kHello}, {"format", schema}}).chat.grammar);
  EXPECT_EQ(chat_error({{"model", "m"}, {"messages", kHello}, {"format", "yaml"}}).param, "format");
  const ApiError e = chat_error({{"model", "m"}, {"messages", kHello}, {"format", {{"type", "object"}, {"not", {}}}}});
  EXPECT_EQ(e.param, "format");
  EXPECT_EQ(e.code, "unsupported_schema");
}

TEST(OllamaJson, ToolCallsAndToolResultsBecomeWhatTemplatesRead) {
  const OllamaRequest r = chat_ok(json::parse(R"({
    "model": "m",
    "tools": [{"type": "function", "function": {"name": "lights_on", "parameters": {"type": "object"}}}],
    "messages": [
      {"role": "user", "content": "Light the kitchen"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lights_on", "arguments": {"room": "kitchen"}}}]},
      {"role": "tool", "content": "ok", "tool_name": "lights_on"}]})"));
  EXPECT_TRUE(r.chat.tools_active());
  const json& call = r.chat.messages[1]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["arguments"], json({{"room", "kitchen"}}));
  EXPECT_EQ(r.chat.messages[2]["name"], "lights_on");
  EXPECT_EQ(r.chat.messages[2]["role"], "tool");
}

TEST(OllamaJson, NoMessagesIsALoadRequest) {
  EXPECT_TRUE(chat_ok({{"model", "m"}}).load_only);
  EXPECT_TRUE(chat_ok({{"model", "m"}, {"messages", json::array()}}).load_only);
  EXPECT_TRUE(generate_ok({{"model", "m"}}).load_only);
  EXPECT_TRUE(generate_ok({{"model", "m"}, {"prompt", ""}}).load_only);
}

TEST(OllamaJson, GenerateIsOneUserTurnThroughTheTemplateOrTheRawText) {
  const OllamaRequest templated = generate_ok({{"model", "m"}, {"prompt", "Why?"}, {"system", "Be brief."}});
  EXPECT_TRUE(templated.generate);
  EXPECT_EQ(templated.chat.endpoint, Endpoint::kChat);
  EXPECT_EQ(templated.chat.messages,
            json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}])"));
  const OllamaRequest raw = generate_ok({{"model", "m"}, {"prompt", "Once"}, {"raw", true}, {"context", {1, 2, 3}}});
  EXPECT_EQ(raw.chat.endpoint, Endpoint::kCompletion);
  EXPECT_EQ(raw.chat.prompt_text, "Once");
  EXPECT_EQ(raw.context, (std::vector<int32_t>{1, 2, 3}));
  for (const auto& [key, value] : {std::pair<const char*, json>{"suffix", "end"},
                                   {"template", "{{ .Prompt }}"},
                                   {"images", {"aGk="}},
                                   {"width", 512},
                                   {"context", {-1}}}) {
    auto r = validate_ollama_generate({{"model", "m"}, {"prompt", "x"}, {key, value}});
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.error().param, key);
  }
}

TEST(OllamaJson, ThinkLevelsSetTheReasoningEffort) {
  EXPECT_FALSE(chat_ok({{"model", "m"}, {"messages", kHello}, {"think", false}}).think);
  const OllamaRequest r = chat_ok({{"model", "m"}, {"messages", kHello}, {"think", "high"}});
  EXPECT_TRUE(r.think);
  EXPECT_EQ(r.chat.chat_template_kwargs, json({{"reasoning_effort", "high"}}));
}

TEST(OllamaJson, StatsAreNanosecondsAndPromptEvalCountsComputedTokens) {
  RequestUsage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 64;
  u.completion_tokens = 10;
  u.ttft_ms = 20;
  u.prefill_ms = 15;
  u.total_ms = 120;
  const json s = ollama_stats_json(u);
  EXPECT_EQ(s["prompt_eval_count"], 36);
  EXPECT_EQ(s["eval_count"], 10);
  EXPECT_EQ(s["total_duration"], 120'000'000);
  EXPECT_EQ(s["prompt_eval_duration"], 15'000'000);
  EXPECT_EQ(s["eval_duration"], 100'000'000);
  EXPECT_EQ(s["load_duration"], 0);
  EXPECT_EQ(s["hearth"]["cached_tokens"], 64);
  EXPECT_EQ(s["hearth"]["prompt_tokens"], 100);
}

TEST(OllamaJson, ChunksAndTheFinalObjectHaveOllamasShape) {
  OllamaRequest chat = chat_ok({{"model", "m:latest"}, {"messages", kHello}});
  const json piece = ollama_chunk_json(chat, "T", "Hi");
  EXPECT_EQ(piece, json::parse(R"({"model": "m:latest", "created_at": "T", "message": {"role": "assistant",
                                  "content": "Hi"}, "done": false})"));
  OllamaFinal f;
  f.text = "";
  f.reason = FinishReason::kLength;
  f.calls = {ToolCall{"call_1", "lights_on", R"({"room":"kitchen"})"}};
  const json end = ollama_final_json(chat, "T", f);
  EXPECT_EQ(end["done"], true);
  EXPECT_EQ(end["done_reason"], "length");
  EXPECT_EQ(end["message"]["tool_calls"],
            json::parse(R"([{"function": {"name": "lights_on", "arguments": {"room": "kitchen"}}}])"));
  EXPECT_FALSE(end.contains("context"));
  EXPECT_TRUE(end.contains("eval_count"));

  OllamaRequest gen = generate_ok({{"model", "m"}, {"prompt", "x"}});
  OllamaFinal g;
  g.text = "tail";
  g.reason = FinishReason::kStop;
  g.context = {1, 2};
  const json gend = ollama_final_json(gen, "T", g);
  EXPECT_EQ(gend["response"], "tail");
  EXPECT_EQ(gend["done_reason"], "stop");
  EXPECT_EQ(gend["context"], json({1, 2}));
  EXPECT_FALSE(gend.contains("message"));
  EXPECT_EQ(ndjson_line(json{{"a", 1}}), "{\"a\":1}\n");
  EXPECT_EQ(ollama_error_json(invalid_request("bad", "x")), json({{"error", "bad"}}));
}

TEST(OllamaJson, ModelEntriesAndNames) {
  EXPECT_EQ(ollama_model_name("stories260K"), "stories260K:latest");
  EXPECT_EQ(ollama_model_name("qwen3:8b"), "qwen3:8b");
  EXPECT_EQ(strip_latest_tag("stories260K:latest"), "stories260K");
  EXPECT_EQ(strip_latest_tag("qwen3:8b"), "qwen3:8b");
  const OllamaModelFacts facts{"stories260K", 1000, 512, true, -1};
  const json tag = ollama_tag_json(facts);
  EXPECT_EQ(tag["name"], "stories260K:latest");
  EXPECT_EQ(tag["size"], 1000);
  EXPECT_EQ(tag["details"]["format"], "gguf");
  const json ps = ollama_ps_json(facts);
  EXPECT_EQ(ps["context_length"], 512);
  EXPECT_EQ(ps["size_vram"], 0);
  EXPECT_TRUE(ps.contains("expires_at"));
  const json show = ollama_show_json(facts, "gguf template", true);
  EXPECT_EQ(show["model_info"]["general.context_length"], 512);
  EXPECT_EQ(show["capabilities"], json({"completion", "tools"}));
  OllamaModelFacts encoder = facts;  // a BERT-family encoder: embeddings only
  encoder.embedding = true;
  encoder.completion = false;
  EXPECT_EQ(ollama_show_json(encoder, "", true)["capabilities"], json({"embedding"}));
  EXPECT_EQ(*parse_ollama_show(R"({"model": "a:latest"})"), "a:latest");
  EXPECT_EQ(*parse_ollama_show(R"({"name": "b"})"), "b");
  EXPECT_FALSE(parse_ollama_show("{}").ok());
  EXPECT_FALSE(parse_ollama_show("[").ok());
}

TEST(OllamaJson, TimestampsAreRfc3339WithNanoseconds) {
  const std::string t = ollama_timestamp_now();
  ASSERT_EQ(t.size(), 30u) << t;
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t[19], '.');
  EXPECT_EQ(t.back(), 'Z');
}

}  // namespace
}  // namespace hearth::server

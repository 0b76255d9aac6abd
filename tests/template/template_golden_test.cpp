// Golden tests: the real chat templates in ../shared/templates render known conversations into exactly the prompt
// text each model family expects (written by hand from each format's specification).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "template/chat_template.h"

namespace hearth {
namespace {

using Json = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(HEARTH_SHARED_DIR) + "/templates/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ChatTemplate load(const std::string& name) {
  const std::string source = read_template(name);
  EXPECT_FALSE(source.empty()) << name;
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.ok()) << name << ": " << (t.ok() ? "" : t.error().message);
  if (!t.ok()) return ChatTemplate::fallback();
  // 2024-07-26 12:00 UTC, so strftime_now gives "26 Jul 2024".
  t->set_clock([] { return std::chrono::system_clock::from_time_t(1721995200); });
  return std::move(t).value();
}

std::string render_ok(const ChatTemplate& t, const Json& messages, bool add_generation_prompt, const std::string& bos,
                      const std::string& eos, const Json& tools = nullptr, const Json& extra = Json::object()) {
  Result<std::string> out = t.render(messages, tools, add_generation_prompt, bos, eos, extra);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  return out.ok() ? *out : "";
}

std::string render_error(const ChatTemplate& t, const Json& messages, const std::string& bos, const std::string& eos,
                         const Json& tools = nullptr) {
  Result<std::string> out = t.render(messages, tools, true, bos, eos);
  EXPECT_FALSE(out.ok()) << *out;
  return out.ok() ? "" : out.error().message;
}

const Json kChat = Json::parse(R"([
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "Hello"},
  {"role": "assistant", "content": "Hi there!"},
  {"role": "user", "content": "How are you?"}])");
const Json kOneUser = Json::parse(R"([{"role": "user", "content": "Hello"}])");
const Json kNoSystem = Json::parse(R"([
  {"role": "user", "content": "Hello"},
  {"role": "assistant", "content": "Hi there!"},
  {"role": "user", "content": "How are you?"}])");
const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Get the weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}])");
const Json kToolChat = Json::parse(R"([
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "abc123def", "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
  {"role": "tool", "tool_call_id": "abc123def", "content": "18C"}])");
const std::string kToolsJson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": )"
    R"({"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, )"
    R"("required": ["city"]}}})";
const std::string kParamsJson =
    R"({"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, )"
    R"("required": ["city"]})";

TEST(TemplateGolden, Qwen25ChatMl) {
  const ChatTemplate t = load("Qwen-Qwen2.5-7B-Instruct.jinja");
  EXPECT_EQ(render_ok(t, kChat, true, "", "<|im_end|>"),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_ok(t, kOneUser, false, "", "<|im_end|>"),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n");
  EXPECT_EQ(render_ok(t, kToolChat, true, "", "<|im_end|>", kTools),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
                kToolsJson +
                "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                "<args-json-object>}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                "\"Paris\"}}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n");
}

const char* kLlamaHeader =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

TEST(TemplateGolden, Llama31) {
  const ChatTemplate t = load("meta-llama-Llama-3.1-8B-Instruct.jinja");
  EXPECT_EQ(render_ok(t, kChat, true, "<|begin_of_text|>", "<|eot_id|>"),
            std::string(kLlamaHeader) +
                "You are helpful.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_ok(t, kOneUser, false, "<|begin_of_text|>", "<|eot_id|>"),
            std::string(kLlamaHeader) + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
  const std::string tool_json_indented =
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"description\": \"Get the weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
      "            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n"
      "                    \"description\": \"The city name\"\n                }\n            },\n"
      "            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}";
  // Tools go into the first user message; a tool result (a string) is JSON-encoded, as the real template does.
  EXPECT_EQ(render_ok(t, kToolChat, true, "<|begin_of_text|>", "<|eot_id|>", kTools),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call with its proper arguments "
            "that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
            "value}.Do not use variables.\n\n" +
                tool_json_indented + "\n\nWeather in Paris?<|eot_id|>" +
                "<|start_header_id|>assistant<|end_header_id|>\n\n"
                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
                "<|start_header_id|>ipython<|end_header_id|>\n\n\"18C\"<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // date_string from `extra` overrides the built-in date.
  EXPECT_EQ(render_ok(t, kOneUser, false, "<|begin_of_text|>", "<|eot_id|>", nullptr, {{"date_string", "01 Jan 2025"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\n"
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
  Json two_calls = kToolChat;
  two_calls[1]["tool_calls"].push_back(two_calls[1]["tool_calls"][0]);
  EXPECT_EQ(render_error(t, two_calls, "<|begin_of_text|>", "<|eot_id|>", kTools),
            "This model only supports single tool-calls at once!");
}

TEST(TemplateGolden, Llama32UsesStrftimeNow) {
  const ChatTemplate t = load("meta-llama-Llama-3.2-3B-Instruct.jinja");
  EXPECT_EQ(render_ok(t, kChat, true, "<|begin_of_text|>", "<|eot_id|>"),
            std::string(kLlamaHeader) +
                "You are helpful.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_ok(t, kNoSystem, false, "<|begin_of_text|>", "<|eot_id|>"),
            std::string(kLlamaHeader) +
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>");
  // Tools with no user message to carry them.
  EXPECT_EQ(render_error(t, Json::array(), "<|begin_of_text|>", "<|eot_id|>", kTools),
            "Cannot put tools in the first user message when there's no first user message!");
}

TEST(TemplateGolden, MistralNemo) {
  const ChatTemplate t = load("mistralai-Mistral-Nemo-Instruct-2407.jinja");
  // The system message joins the last user turn; add_generation_prompt changes nothing.
  EXPECT_EQ(render_ok(t, kChat, true, "<s>", "</s>"),
            "<s>[INST]Hello[/INST]Hi there!</s>[INST]You are helpful.\n\nHow are you?[/INST]");
  EXPECT_EQ(render_ok(t, kOneUser, false, "<s>", "</s>"), "<s>[INST]Hello[/INST]");
  EXPECT_EQ(render_ok(t, kToolChat, true, "<s>", "</s>", kTools),
            "<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
            "\"description\": \"Get the weather\", \"parameters\": " +
                kParamsJson +
                "}}][/AVAILABLE_TOOLS][INST]Weather in Paris?[/INST]"
                "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                "\"abc123def\"}]</s>"
                "[TOOL_RESULTS]{\"content\": 18C, \"call_id\": \"abc123def\"}[/TOOL_RESULTS]");
  EXPECT_EQ(render_error(t, Json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"),
                         "<s>", "</s>"),
            "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...");
  Json bad_id = kToolChat;
  bad_id[1]["tool_calls"][0]["id"] = "short";
  EXPECT_EQ(render_error(t, bad_id, "<s>", "</s>", kTools),
            "Tool call IDs should be alphanumeric strings with length 9!");
}

TEST(TemplateGolden, Gemma2) {
  const ChatTemplate t = load("google-gemma-2-2b-it.jinja");
  EXPECT_EQ(render_ok(t, kNoSystem, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there!<end_of_turn>\n"
            "<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(render_ok(t, Json::parse(R"([{"role": "user", "content": "  padded  \n"}])"), false, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\npadded<end_of_turn>\n");
  EXPECT_EQ(render_error(t, kChat, "<bos>", "<eos>"), "System role not supported");
  EXPECT_EQ(render_error(t, Json::parse(R"([{"role": "assistant", "content": "first"}])"), "<bos>", "<eos>"),
            "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(TemplateGolden, Phi35) {
  const ChatTemplate t = load("microsoft-Phi-3.5-mini-instruct.jinja");
  EXPECT_EQ(render_ok(t, kChat, true, "<s>", "<|endoftext|>"),
            "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there!<|end|>\n"
            "<|user|>\nHow are you?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render_ok(t, kOneUser, false, "<s>", "<|endoftext|>"), "<|user|>\nHello<|end|>\n<|endoftext|>");
}

TEST(TemplateGolden, Hermes2ProToolUse) {
  const ChatTemplate t = load("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja");
  const std::string expected =
      "<|begin_of_text|><|im_start|>system\n"
      "You are a function calling AI model. You are provided with function signatures within <tools></tools> XML "
      "tags. You may call one or more functions to assist with the user query. Don't make assumptions about what "
      "values to plug into functions. Here are the available tools: <tools> "
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"get_weather(city: str) "
      "- Get the weather\n\n    Args:\n        city(str): The city name\", \"parameters\": " +
      kParamsJson +
      "} </tools>Use the following pydantic model json schema for each tool call you will make: {\"properties\": "
      "{\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": "
      "\"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\n"
      "For each function call return a json object with function name and arguments within <tool_call></tool_call> "
      "XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-dict>}\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>tool\n<tool_response>\n18C\n</tool_response><|im_end|>"
      "<|im_start|>assistant\n";
  EXPECT_EQ(render_ok(t, kToolChat, true, "<|begin_of_text|>", "<|im_end|>", kTools), expected);

  // The recursive macro maps JSON schema types to Python types.
  const Json typed_tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "description": "d",
    "parameters": {"type": "object", "properties": {
      "n": {"type": "integer", "description": "count"},
      "m": {"type": "object", "additionalProperties": {"type": "number"}, "description": "map"},
      "u": {"type": ["string", "integer"], "description": "either"}}}}}])");
  const std::string out = render_ok(t, kOneUser, false, "", "", typed_tools);
  EXPECT_NE(out.find("\"description\": \"f(n: int, m: dict[str, float], u: Union[str,int]) - d\n\n    Args:\n"
                     "        n(int): count        m(dict[str, float]): map        u(Union[str,int]): either\""),
            std::string::npos)
      << out;
  // A type name the macro does not know recurses forever in Python too ("null" is iterable, so it loops over its
  // characters); here it stops with an error instead of a stack overflow.
  Json null_tools = typed_tools;
  null_tools[0]["function"]["parameters"]["properties"]["u"]["type"] = "null";
  EXPECT_NE(render_error(t, kOneUser, "", "", null_tools).find("recursion deeper than"), std::string::npos);
}

TEST(TemplateGolden, DeepSeekR1DistillQwen) {
  const ChatTemplate t = load("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
  const std::string bos = "<｜begin▁of▁sentence｜>";
  Json chat = kChat;
  chat[2]["content"] = "<think>\nhmm\n</think>\n\nHi there!";  // reasoning is dropped from history
  EXPECT_EQ(render_ok(t, chat, true, bos, "<｜end▁of▁sentence｜>"),
            bos +
                "You are helpful.<｜User｜>Hello<｜Assistant｜>\n\nHi there!<｜end▁of▁sentence｜>"
                "<｜User｜>How are you?<｜Assistant｜><think>\n");
  EXPECT_EQ(render_ok(t, kOneUser, false, bos, "<｜end▁of▁sentence｜>"), bos + "<｜User｜>Hello");
  Json tool_chat = kToolChat;
  tool_chat[1]["tool_calls"][0]["function"]["arguments"] = R"({"city": "Paris"})";
  EXPECT_EQ(render_ok(t, tool_chat, true, bos, "<｜end▁of▁sentence｜>"),
            bos +
                "<｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
                "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>"
                "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18C<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
}

TEST(TemplateGolden, Fallback) {
  const ChatTemplate t = ChatTemplate::fallback();
  EXPECT_TRUE(t.is_fallback());
  EXPECT_EQ(render_ok(t, kChat, true, "<s>", "</s>"),
            "You are helpful.\n\nUser: Hello\nAssistant:Hi there!\nUser: How are you?\nAssistant:");
  EXPECT_EQ(render_ok(t, kOneUser, false, "<s>", "</s>"), "User: Hello\n");
  EXPECT_EQ(render_ok(t, Json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"}]}])"),
                      true, "", ""),
            "User: ab\nAssistant:");
}

// An assistant turn is the content verbatim after "Assistant:", as the model continued the generation prompt, so
// the next turn's prompt starts with the previous prompt followed by the answer's exact text.
TEST(TemplateGolden, FallbackRendersAnAnswerAsTheModelWroteIt) {
  const ChatTemplate t = ChatTemplate::fallback();
  const Json first = Json::parse(R"([{"role": "user", "content": "Hi"}])");
  const std::string prompt = render_ok(t, first, true, "", "");
  EXPECT_EQ(prompt, "User: Hi\nAssistant:");
  for (const std::string answer : {" Hello there.", "\nHello.", "Hello.", ""}) {
    Json next = first;
    next.push_back({{"role", "assistant"}, {"content", answer}});
    next.push_back({{"role", "user"}, {"content", "And?"}});
    EXPECT_EQ(render_ok(t, next, true, "", ""), prompt + answer + "\nUser: And?\nAssistant:") << answer;
  }
  EXPECT_EQ(render_ok(t, Json::parse(R"([{"role": "user", "content": ""}])"), false, "", ""), "User: \n");
}

TEST(TemplateGolden, FromGguf) {
  std::string warning = "stale";
  Result<GgufFile> stories = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/models/stories260K.gguf");
  ASSERT_TRUE(stories.ok()) << stories.error().message;
  const ChatTemplate none = ChatTemplate::from_gguf(*stories, &warning);
  EXPECT_TRUE(none.is_fallback());
  EXPECT_EQ(warning, "the model has no tokenizer.chat_template; using the fallback chat format");

  Result<GgufFile> phi3 = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(phi3.ok()) << phi3.error().message;
  const ChatTemplate phi = ChatTemplate::from_gguf(*phi3, &warning);
  EXPECT_FALSE(phi.is_fallback());
  EXPECT_EQ(warning, "");
  Result<std::string> out = phi.render(nlohmann::json::parse(R"([{"role": "user", "content": "Hi"}])"), nullptr, true,
                                       "<s>", "<|endoftext|>");
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_NE(out->find("<|user|>\nHi<|end|>\n<|assistant|>\n"), std::string::npos) << *out;

  const std::string dir = HEARTH_TEST_TMP_DIR;
  std::filesystem::create_directories(dir);
  GgufWriter writer;
  writer.add("general.architecture", gguf_string("llama"));
  writer.add("tokenizer.chat_template", gguf_string("{% for m in messages %}\n{% include 'x' %}{% endfor %}"));
  const std::string path = dir + "/template_bad.gguf";
  ASSERT_TRUE(writer.write_file(path).ok());
  Result<GgufFile> bad = GgufFile::open(path);
  ASSERT_TRUE(bad.ok()) << bad.error().message;
  const ChatTemplate fallback = ChatTemplate::from_gguf(*bad, &warning);
  EXPECT_TRUE(fallback.is_fallback());
  EXPECT_EQ(warning,
            "chat template: 2:4: unsupported template construct '{% include %}'; using the fallback chat format");
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

TEST(TemplateGolden, ConcurrentRendersOfOneTemplateAgree) {
  const ChatTemplate t = load("meta-llama-Llama-3.1-8B-Instruct.jinja");
  const std::string expected = render_ok(t, kToolChat, true, "<|begin_of_text|>", "<|eot_id|>", kTools);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 50; ++k) {
        Result<std::string> out = t.render(kToolChat, kTools, true, "<|begin_of_text|>", "<|eot_id|>");
        if (!out.ok() || *out != expected) ++mismatches;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

// Every prefix-truncation (in steps) and seeded byte mutation of the real templates parses or fails cleanly, and
// whatever parses renders or fails cleanly: no crash, hang or sanitizer report.
TEST(TemplateGolden, TruncatedAndMutatedTemplatesNeverCrash) {
  const char* names[] = {"Qwen-Qwen2.5-7B-Instruct.jinja",
                         "meta-llama-Llama-3.1-8B-Instruct.jinja",
                         "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                         "google-gemma-2-2b-it.jinja",
                         "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
                         "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"};
  const char kMutations[] = "{}%#-+()[]'\".|~ \nx0";
  uint32_t seed = 12345;
  const auto next_random = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  int parsed = 0;
  for (const char* name : names) {
    const std::string source = read_template(name);
    std::vector<std::string> variants;
    for (size_t cut = 0; cut < source.size(); cut += 97) variants.push_back(source.substr(0, cut));
    for (int m = 0; m < 40; ++m) {
      std::string mutated = source;
      for (int k = 0; k < 3; ++k) {
        mutated[next_random() % mutated.size()] = kMutations[next_random() % (sizeof(kMutations) - 1)];
      }
      variants.push_back(std::move(mutated));
    }
    for (const std::string& variant : variants) {
      Result<ChatTemplate> t = ChatTemplate::parse(variant);
      if (!t.ok()) {
        EXPECT_EQ(t.error().message.rfind("chat template: ", 0), 0u) << t.error().message;
        continue;
      }
      ++parsed;
      t->set_limits({.max_steps = 100'000, .max_depth = 400, .max_output_bytes = 1 << 20});
      (void)t->render(kToolChat, kTools, true, "<s>", "</s>");
      (void)t->render(kChat, nullptr, false, "<s>", "</s>");
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace hearth

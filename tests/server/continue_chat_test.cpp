// A continued assistant message (ChatFormatter::render_continued): the prompt ends where the final assistant
// message's text ends, on every template we ship a vocabulary for, and a channel parser primed with the answer so
// far reads the continuation in the channel the message was in.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "server/api/chat.h"
#include "server/api/gemma4_answer.h"
#include "server/api/harmony.h"

namespace hearth::server {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
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

ChatTemplate vocab_template(const std::string& name) {
  Result<GgufFile> file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/" + name);
  EXPECT_TRUE(file.ok());
  return ChatTemplate::from_gguf(*file, nullptr);
}

const json kChat = json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Once upon a"}])");

// Every template: the text is the chat before the message, its generation prompt, then the message's text; the
// primer is that text (the templates print an answer right after their generation prompt).
TEST(ContinueChat, PromptEndsWithTheFinalMessagesText) {
  const json before(kChat.begin(), kChat.end() - 1);
  for (const char* vocab : {"ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-gemma3.gguf",
                            "ggml-vocab-phi-3.gguf", "ggml-vocab-llama-spm.gguf"}) {
    const Tokenizer tokenizer = load_vocab(vocab);
    const auto chat = ChatFormatter::create(vocab_template(vocab), tokenizer);
    auto continued = chat->render_continued(kChat, nullptr);
    ASSERT_TRUE(continued.ok()) << vocab << ": " << continued.error().message;
    auto answered = chat->render(before, nullptr);
    ASSERT_TRUE(answered.ok()) << vocab;
    EXPECT_TRUE(continued->text.ends_with("Once upon a")) << vocab << ": " << continued->text;
    EXPECT_TRUE(continued->text.starts_with(*answered)) << vocab << ": " << continued->text;
    EXPECT_EQ(continued->text.substr(answered->size()), continued->primer) << vocab;
    // Qwen 3's writes the empty thinking block its answers carry before the text.
    EXPECT_TRUE(continued->primer.ends_with("Once upon a")) << vocab << ": " << continued->primer;
  }
}

TEST(ContinueChat, FallbackFormatContinuesAfterAssistantColon) {
  const Tokenizer tokenizer = load_vocab("ggml-vocab-llama-spm.gguf");
  const auto chat = ChatFormatter::create(ChatTemplate::fallback(), tokenizer);
  auto continued = chat->render_continued(kChat, nullptr);
  ASSERT_TRUE(continued.ok()) << continued.error().message;
  EXPECT_EQ(continued->text, "Be brief.\n\nUser: Hi\nAssistant:Once upon a");
}

// The mark that finds the message's end is the last one: a client that sends it in the text moves nothing.
TEST(ContinueChat, ClientTextWithTheMarkDoesNotMoveTheCut) {
  const Tokenizer tokenizer = load_vocab("ggml-vocab-llama-spm.gguf");
  const auto chat = ChatFormatter::create(ChatTemplate::fallback(), tokenizer);
  json messages = kChat;
  messages.back()["content"] = "A \xEF\xBF\xBEhearth-continue\xEF\xBF\xBE B";
  auto continued = chat->render_continued(messages, nullptr);
  ASSERT_TRUE(continued.ok());
  EXPECT_TRUE(continued->text.ends_with("A \xEF\xBF\xBEhearth-continue\xEF\xBF\xBE B")) << continued->text;
}

// A template that does not print the assistant's text cannot be continued: an error, not a wrong prompt.
TEST(ContinueChat, TemplateThatDropsTheTextIsAnError) {
  auto tmpl = ChatTemplate::parse(
      "{% for m in messages %}{% if m.role == 'user' %}U: {{ m.content }}\n{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}A:{% endif %}");
  ASSERT_TRUE(tmpl.ok());
  const Tokenizer tokenizer = load_vocab("ggml-vocab-llama-spm.gguf");
  auto continued = ChatFormatter::create(*tmpl, tokenizer)->render_continued(kChat, nullptr);
  ASSERT_FALSE(continued.ok());
  EXPECT_NE(continued.error().message.find("cannot be continued"), std::string::npos);
}

// gpt-oss: the message is its final channel; primed with it, the parser reads the continuation as content.
TEST(ContinueChat, HarmonyPrimerPutsTheContinuationInTheFinalChannel) {
  const Tokenizer tokenizer = load_vocab("ggml-vocab-gpt-oss.gguf");
  auto tmpl = ChatTemplate::parse(read_file(std::string(HEARTH_TEST_DATA_DIR) + "/openai-gpt-oss-120b.jinja"));
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  const auto chat = ChatFormatter::create(*tmpl, tokenizer);
  ASSERT_TRUE(chat->harmony());
  auto continued = chat->render_continued(kChat, nullptr);
  ASSERT_TRUE(continued.ok()) << continued.error().message;
  EXPECT_TRUE(continued->text.ends_with("<|start|>assistant<|channel|>final<|message|>Once upon a")) << continued->text;
  EXPECT_EQ(continued->primer, "<|channel|>final<|message|>Once upon a");
  HarmonyParser parser;
  EXPECT_TRUE(parser.push(continued->primer).reasoning.empty());
  ChannelDelta rest = parser.push(" time<|return|>");
  ChannelDelta tail = parser.finish();
  EXPECT_EQ(rest.content + tail.content, " time");
  EXPECT_TRUE(parser.calls().empty());
}

// Gemma 4: the message is plain content after "<|turn>model\n"; the parser reads the continuation as content.
TEST(ContinueChat, Gemma4PrimerIsPlainContent) {
  const Tokenizer tokenizer = load_vocab("ggml-vocab-gemma3.gguf");
  auto tmpl = ChatTemplate::parse(read_file(std::string(HEARTH_TEMPLATE_DIR) + "/gemma4.jinja"));
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  const auto chat = ChatFormatter::create(*tmpl, tokenizer);
  auto continued = chat->render_continued(kChat, nullptr);
  ASSERT_TRUE(continued.ok()) << continued.error().message;
  EXPECT_TRUE(continued->text.ends_with("Once upon a")) << continued->text;
  // Its generation prompt opens an empty thought channel the continued turn does not have: the primer starts
  // where they differ.
  EXPECT_EQ(continued->primer, "Once upon a");
  Gemma4Parser parser(json::array());
  (void)parser.push(continued->primer);
  ChannelDelta rest = parser.push(" time");
  ChannelDelta tail = parser.finish();
  EXPECT_EQ(rest.content + tail.content, " time");
}

}  // namespace
}  // namespace hearth::server

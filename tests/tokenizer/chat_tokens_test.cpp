// The chat template stored in each family's vocabulary, rendered and tokenized as the server does (parse_special):
// every chat marker of the rendered text is one token id, the ids decode back to the text, and the end-of-turn
// tokens the metadata and the template use end generation (Tokenizer::is_eog, which the engine turns into
// stop_token_ids unless ignore_eos).
#include <gtest/gtest.h>

#include <algorithm>

#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace hearth {
namespace {

using Json = nlohmann::ordered_json;

const Json kChat = Json::parse(R"([
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "Hello"},
  {"role": "assistant", "content": "Hi there!"},
  {"role": "user", "content": "How are you?"}])");

struct ChatVocab {
  const char* name;
  const char* file;
  const char* bos;
  const char* eos;
  std::vector<std::string> markers;  // every special token the render holds
  std::vector<std::string> eog;      // end generation
  std::vector<std::string> not_eog;  // special, but do not end generation
  Json extra = Json::object();
  // Phi-3 (llama.cpp's rule, kept for its reference tokenizations) drops whitespace after special tokens, so its
  // ids do not decode back to the rendered "\n"s.
  bool decodes_back = true;
};

const ChatVocab kVocabs[] = {
    {"Llama3",
     "vocab/ggml-vocab-llama-bpe.gguf",
     "<|begin_of_text|>",
     "<|eot_id|>",
     {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
     {"<|eot_id|>"},  // Llama 3.0's vocabulary: 128008 is reserved, not <|eom_id|> (3.1)
     {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"}},
    {"Qwen3",
     "vocab/ggml-vocab-qwen2.gguf",
     "",
     "<|im_end|>",
     {"<|im_start|>", "<|im_end|>", "<think>", "</think>"},
     {"<|im_end|>", "<|endoftext|>"},
     {"<|im_start|>", "<think>", "</think>"},
     {{"enable_thinking", false}}},
    {"Gemma3",
     "vocab/ggml-vocab-gemma3.gguf",
     "<bos>",
     "<eos>",
     {"<bos>", "<start_of_turn>", "<end_of_turn>"},
     {"<end_of_turn>"},
     {"<bos>", "<start_of_turn>"}},
    {"Phi3",
     "vocab/ggml-vocab-phi-3.gguf",
     "<s>",
     "<|endoftext|>",
     {"<|user|>", "<|assistant|>", "<|end|>"},  // this template drops system messages
     {"<|end|>", "<|endoftext|>"},
     {"<|system|>", "<|user|>", "<|assistant|>"},
     Json::object(),
     false},
};

// gtest prints the case by its name (test names and failure messages).
void PrintTo(const ChatVocab& v, std::ostream* os) {
  *os << v.name;
}

size_t count_text(const std::string& text, const std::string& marker) {
  size_t n = 0;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + marker.size())) ++n;
  return n;
}

size_t count_id(const std::vector<TokenId>& ids, TokenId id) {
  return std::count_if(ids.begin(), ids.end(), [&](TokenId t) { return t.value == id.value; });
}

class ChatVocabTest : public testing::TestWithParam<ChatVocab> {};

std::string render(const ChatVocab& v) {
  Result<GgufFile> file = GgufFile::open(test::shared_path(v.file));
  EXPECT_TRUE(file.ok()) << v.file;
  if (!file.ok()) return "";
  std::string warning;
  const ChatTemplate t = ChatTemplate::from_gguf(*file, &warning);
  EXPECT_EQ(warning, "");
  Result<std::string> out = t.render(kChat, Json(nullptr), true, v.bos, v.eos, v.extra);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  return out.ok() ? *out : "";
}

TEST_P(ChatVocabTest, RenderedMarkersAreSingleTokensWithParseSpecial) {
  const ChatVocab& v = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(v.file);
  const std::string text = render(v);
  const std::vector<TokenId> ids = tok.encode(text, false, true);
  const std::vector<TokenId> plain = tok.encode(text, false, false);
  for (const std::string& marker : v.markers) {
    const std::optional<TokenId> id = tok.find_token(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    EXPECT_GT(count_text(text, marker), 0u) << marker << " is not in the render:\n" << text;
    EXPECT_EQ(count_id(ids, *id), count_text(text, marker)) << marker;
    // Control tokens come only from parse_special; user-defined ones (Qwen's <think>) are always matched.
    if (tok.is_control(*id)) {
      EXPECT_EQ(count_id(plain, *id), 0u) << marker;
    }
  }
  if (v.decodes_back) {
    EXPECT_EQ(tok.decode(ids, {.render_special = true}), text);
  }
}

TEST_P(ChatVocabTest, EndOfTurnTokensEndGeneration) {
  const ChatVocab& v = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(v.file);
  EXPECT_TRUE(tok.is_eog(tok.eos())) << "EOS " << tok.token_text(tok.eos());
  for (const std::string& text : v.eog) {
    const std::optional<TokenId> id = tok.find_token(text);
    ASSERT_TRUE(id.has_value()) << text;
    EXPECT_TRUE(tok.is_eog(*id)) << text;
  }
  for (const std::string& text : v.not_eog) {
    const std::optional<TokenId> id = tok.find_token(text);
    ASSERT_TRUE(id.has_value()) << text;
    EXPECT_FALSE(tok.is_eog(*id)) << text;
  }
  // The token that closes each turn of the render ends generation: the model writes it to end its answer.
  const std::string& end_of_turn = v.eog.front();
  EXPECT_GT(count_text(render(v), end_of_turn), 0u) << end_of_turn;
}

INSTANTIATE_TEST_SUITE_P(Vocabs, ChatVocabTest, testing::ValuesIn(kVocabs),
                         [](const testing::TestParamInfo<ChatVocab>& info) { return info.param.name; });

// Metadata names end tokens that no text rule knows: tokenizer.ggml.eot_token_id and eom_token_id.
TEST(ChatTokens, EotAndEomMetadataEndGeneration) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "<turn_done>", "<msg_done>", "a"};
  v.token_types = {2, 3, 3, 3, 3, 1};
  v.eot_id = 3;
  v.eom_id = 4;
  Result<Tokenizer> tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->is_eog(TokenId(2)));
  EXPECT_TRUE(tok->is_eog(TokenId(3)));
  EXPECT_TRUE(tok->is_eog(TokenId(4)));
  EXPECT_FALSE(tok->is_eog(TokenId(1)));
  EXPECT_FALSE(tok->is_eog(TokenId(5)));
  v.eom_id = 6;
  Result<Tokenizer> bad = Tokenizer::from_vocab(v);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "tokenizer.ggml.eom_token_id = 6 is out of range: the vocabulary has 6 tokens");
}

// Harmony (gpt-oss): its markers are control tokens, one id each with parse_special and plain text without; an
// answer ends at <|return|> (final) or <|call|> (a tool call), never at <|end|>, which closes the analysis message
// before the final one.
TEST(ChatTokens, HarmonyMarkersAndEndTokens) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-gpt-oss.gguf");
  const std::string text =
      "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|>Think.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"
      "<|start|>assistant<|channel|>final<|message|>Done.<|return|>";
  const std::vector<TokenId> ids = tok.encode(text, false, true);
  const std::vector<TokenId> plain = tok.encode(text, false, false);
  for (const std::string marker :
       {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>", "<|constrain|>"}) {
    const std::optional<TokenId> id = tok.find_token(marker);
    ASSERT_TRUE(id.has_value()) << marker;
    EXPECT_TRUE(tok.is_control(*id)) << marker;
    EXPECT_EQ(count_id(ids, *id), count_text(text, marker)) << marker;
    EXPECT_EQ(count_id(plain, *id), 0u) << marker;
  }
  EXPECT_EQ(tok.decode(ids, {.render_special = true}), text);
  EXPECT_EQ(tok.token_text(tok.eos()), "<|return|>");
  EXPECT_TRUE(tok.is_eog(*tok.find_token("<|return|>")));
  EXPECT_TRUE(tok.is_eog(*tok.find_token("<|call|>")));
  EXPECT_FALSE(tok.is_eog(*tok.find_token("<|end|>")));
  EXPECT_FALSE(tok.is_eog(*tok.find_token("<|start|>")));
}

// <|end|> stays an end of turn where there is no <|return|> and <|call|> beside it (Phi-3's <|end|>).
TEST(ChatTokens, EndIsEogOutsideHarmony) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "<|end|>", "<|return|>", "a"};
  v.token_types = {2, 3, 3, 3, 3, 1};
  Result<Tokenizer> tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->is_eog(TokenId(3)));
  EXPECT_TRUE(tok->is_eog(TokenId(4)));
}

// Gemma 4 ends a turn with <turn|>, and a turn of calls with <|tool_response>; its <|turn> and <|tool_call> start
// things and do not end generation. (Gemma 3's vocabulary, which Gemma 4 files here borrow, has none of them.)
TEST(ChatTokens, Gemma4TurnEndsGeneration) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<bos>", "<eos>", "<|turn>", "<turn|>", "<|tool_call>", "<|tool_response>", "a"};
  v.token_types = {2, 3, 3, 3, 3, 3, 3, 1};
  Result<Tokenizer> tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->is_eog(TokenId(4)));
  EXPECT_TRUE(tok->is_eog(TokenId(6)));
  EXPECT_FALSE(tok->is_eog(TokenId(3)));
  EXPECT_FALSE(tok->is_eog(TokenId(5)));
  const Tokenizer& gemma3 = test::cached_tokenizer("vocab/ggml-vocab-gemma3.gguf");
  EXPECT_FALSE(gemma3.find_token("<turn|>"));
  EXPECT_FALSE(gemma3.find_token("<|tool_call>"));
}

// DeepSeek's end of sentence and CodeLlama's _<EOT> are end markers by their text too, as in llama.cpp.
TEST(ChatTokens, DeepSeekAndCodeLlamaEndMarkersByText) {
  TokenizerVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "<｜end▁of▁sentence｜>", "_<EOT>", "<｜User｜>"};
  v.token_types = {2, 3, 3, 3, 3, 3};
  Result<Tokenizer> tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->is_eog(TokenId(3)));
  EXPECT_TRUE(tok->is_eog(TokenId(4)));
  EXPECT_FALSE(tok->is_eog(TokenId(5)));
}

}  // namespace
}  // namespace hearth

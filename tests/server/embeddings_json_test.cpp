// The embedding routes' dialect-neutral parts (server/api/embeddings.h): OpenAI's four shapes of `input`, the
// 400s naming the field and the limit, and base64 as the openai client decodes it (little-endian float32).

#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf_file.h"
#include "server/api/embeddings.h"

namespace hearth::server {
namespace {

using nlohmann::json;

const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer = [] {
    auto file = GgufFile::open(std::string(HEARTH_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf");
    EXPECT_TRUE(file.ok());
    auto t = Tokenizer::from_gguf(*file);
    EXPECT_TRUE(t.ok());
    return std::move(*t);
  }();
  return tokenizer;
}

ApiResult<EmbeddingInputs> parse(const json& input) {
  return parse_embedding_inputs(input, qwen_tokenizer(), 1000, "input");
}

TEST(EmbeddingInputs, FourShapes) {
  const auto text = parse("hello world");
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->tokens.size(), 1u);
  EXPECT_EQ(text->tokens[0], qwen_tokenizer().encode("hello world", true));
  const auto texts = parse(json::array({"a", "b c"}));
  ASSERT_TRUE(texts.ok());
  EXPECT_EQ(texts->tokens.size(), 2u);
  EXPECT_EQ(texts->num_tokens, static_cast<int64_t>(texts->tokens[0].size() + texts->tokens[1].size()));
  const auto ids = parse(json::array({1, 2, 3}));
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->tokens, (std::vector<std::vector<TokenId>>{{TokenId{1}, TokenId{2}, TokenId{3}}}));
  const auto lists = parse(json::parse("[[1, 2], [3]]"));
  ASSERT_TRUE(lists.ok());
  EXPECT_EQ(lists->tokens.size(), 2u);
  EXPECT_EQ(lists->num_tokens, 3);
}

TEST(EmbeddingInputs, RefusalsNameTheFieldAndTheLimit) {
  const struct {
    json input;
    std::string param, code;
  } cases[] = {
      {json(), "input", "missing_required_parameter"},
      {"", "input", "invalid_value"},
      {json::array(), "input", "invalid_value"},
      {json::parse(R"(["a", ""])"), "input[1]", "invalid_value"},
      {json::parse("[[1], [1000]]"), "input[1]", "invalid_value"},
      {json::parse("[[1], [1.5]]"), "input[1]", "invalid_type"},
      {json::parse("[1, 1000]"), "input", "invalid_value"},
      {json::parse(R"({"a": 1})"), "input", "invalid_type"},
      {json::parse("[true]"), "input[0]", "invalid_type"},
      {json(std::vector<std::string>(kMaxEmbeddingInputs + 1, "a")), "input", "too_many_inputs"},
      {json(std::vector<std::vector<int>>(3, std::vector<int>(kMaxEmbeddingTokens / 2, 1))), "input",
       "too_many_tokens"},
  };
  for (const auto& c : cases) {
    const auto r = parse(c.input);
    ASSERT_FALSE(r.ok()) << c.input.dump().substr(0, 80);
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().param, c.param) << c.input.dump().substr(0, 80);
    EXPECT_EQ(r.error().code, c.code) << c.input.dump().substr(0, 80) << ": " << r.error().message;
  }
}

TEST(EmbeddingBase64, LittleEndianFloat32) {
  EXPECT_EQ(embedding_base64({}), "");
  EXPECT_EQ(embedding_base64({1.0f}), "AACAPw==");             // 00 00 80 3f
  EXPECT_EQ(embedding_base64({1.0f, -2.0f}), "AACAPwAAAMA=");  // ... 00 00 00 c0
  EXPECT_EQ(embedding_base64({0.0f, 0.0f, 0.0f}), "AAAAAAAAAAAAAAAA");
}

}  // namespace
}  // namespace hearth::server

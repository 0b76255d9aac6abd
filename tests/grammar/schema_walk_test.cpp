// Property tests of the schema grammar: random walks (a random accepted byte at each step, then the quick
// completion) give JSON that the tests' own validator (schema_validator.h) accepts; token masks on the qwen, llama-3
// and gemma vocabularies equal the scalar reference and random-logits decoding ends valid. The schemas are what zod
// (v4 toJSONSchema), pydantic and the OpenAI structured-output docs produce.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "grammar/grammar.h"
#include "grammar/schema_validator.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer_test_util.h"

namespace hearth {
namespace {

using nlohmann::json;

bool accepts_whole(const Grammar& g, std::string_view text) {
  GrammarState s = g.start();
  return g.advance(s, text) && g.can_end(s);
}

// zod v4: z.object({...}) with .nullable(), unions, .min()/.max(), .regex(), .email(), .uuid(), bounded arrays,
// nested and discriminated objects, records, iso dates (as z.toJSONSchema prints them).
const json kZod = json::parse(R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 20},
    "nick": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}]},
    "email": {"type": "string", "format": "email",
      "pattern": "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},
    "id": {"type": "string", "format": "uuid",
      "pattern": "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"},
    "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{3}$"},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "big": {"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991},
    "score": {"type": "number", "minimum": 0, "maximum": 1},
    "tags": {"minItems": 1, "maxItems": 3, "type": "array", "items": {"type": "string", "maxLength": 5}},
    "kind": {"anyOf": [{"type": "string", "const": "a"},
      {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false},
      {"type": "object", "properties": {"y": {"type": "boolean"}}, "required": ["y"], "additionalProperties": false}]},
    "d": {"type": "string", "format": "date",
      "pattern": "^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$"},
    "t": {"type": "string", "pattern": "^(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?$"},
    "dt": {"type": "string", "format": "date-time"},
    "rec": {"type": "object", "propertyNames": {"type": "string", "maxLength": 4}, "additionalProperties": {"type": "integer", "multipleOf": 3}},
    "du": {"oneOf": [
      {"type": "object", "properties": {"type": {"type": "string", "const": "a"}, "a": {"type": "string", "maxLength": 4}}, "required": ["type", "a"], "additionalProperties": false},
      {"type": "object", "properties": {"type": {"type": "string", "const": "b"}, "b": {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1}}, "required": ["type", "b"], "additionalProperties": false}]},
    "e": {"type": "string", "enum": ["x", "y"]}
  },
  "required": ["name", "nick", "email", "id", "code", "age", "score", "tags", "kind", "d", "t", "dt", "rec", "du", "e"],
  "additionalProperties": false
})");

// pydantic v2: nested models through $defs, Optional[...] as anyOf with null, a recursive model, Field bounds.
const json kPydantic = json::parse(R"({
  "$defs": {
    "Address": {"properties": {"street": {"title": "Street", "type": "string", "maxLength": 12},
      "zip": {"title": "Zip", "type": "string", "pattern": "^\\d{5}$"}}, "required": ["street", "zip"],
      "title": "Address", "type": "object", "additionalProperties": false},
    "Node": {"properties": {"value": {"type": "integer", "minimum": 0, "maximum": 9},
      "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": null}},
      "required": ["value"], "title": "Node", "type": "object", "additionalProperties": false}
  },
  "properties": {
    "home": {"$ref": "#/$defs/Address"},
    "work": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null},
    "list": {"$ref": "#/$defs/Node"},
    "when": {"format": "date-time", "title": "When", "type": "string"}
  },
  "required": ["home", "list", "when"], "title": "Person", "type": "object", "additionalProperties": false
})");

// The OpenAI structured-output docs' examples: a math tutor's steps, a UI tree (recursive through "#"), and a
// field that is a string or null in a type array.
const json kOpenAi = json::parse(R"({
  "type": "object",
  "properties": {
    "steps": {"type": "array", "items": {"type": "object", "properties": {"explanation": {"type": "string", "maxLength": 30},
      "output": {"type": "string", "maxLength": 10}}, "required": ["explanation", "output"], "additionalProperties": false}, "maxItems": 2},
    "final_answer": {"type": ["string", "null"], "maxLength": 10},
    "ui": {"$ref": "#/$defs/ui"}
  },
  "$defs": {"ui": {"type": "object", "properties": {
      "type": {"type": "string", "enum": ["div", "button", "header"]},
      "label": {"type": "string", "maxLength": 6},
      "children": {"type": "array", "items": {"$ref": "#/$defs/ui"}, "maxItems": 2}},
    "required": ["type", "label", "children"], "additionalProperties": false}},
  "required": ["steps", "final_answer", "ui"],
  "additionalProperties": false
})");

const json* const kSchemas[] = {&kZod, &kPydantic, &kOpenAi};

// A random walk: `steps` random accepted bytes (from all 256), then the quick completion.
std::string random_walk(const Grammar& g, std::mt19937& rng, int steps) {
  GrammarState s = g.start();
  GrammarState next;
  std::string out;
  for (int i = 0; i < steps && !Grammar::is_terminal(s); ++i) {
    std::vector<uint8_t> choices;
    for (int b = 0; b < 256; ++b) {
      next.copy_from(s);
      if (g.advance(next, static_cast<uint8_t>(b))) choices.push_back(static_cast<uint8_t>(b));
    }
    EXPECT_FALSE(choices.empty()) << "stuck after " << out;
    if (choices.empty()) return out;
    const uint8_t b = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    EXPECT_TRUE(g.advance(s, b));
    out.push_back(static_cast<char>(b));
  }
  auto rest = g.quick_completion(s, 4096);
  EXPECT_TRUE(rest.has_value()) << "no completion after " << out;
  return out + rest.value_or("");
}

TEST(SchemaWalk, RandomWalksGiveJsonTheValidatorAccepts) {
  for (const json* schema : kSchemas) {
    auto g = Grammar::from_json_schema(*schema);
    ASSERT_TRUE(g) << g.error().message;
    std::mt19937 rng(7);
    for (int walk = 0; walk < 150; ++walk) {
      const std::string out = random_walk(*g, rng, 40 + walk * 4);
      ASSERT_TRUE(accepts_whole(*g, out)) << out;
      const json parsed = json::parse(out, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << out;
      EXPECT_TRUE(test::validates_schema(parsed, *schema)) << out;
    }
  }
}

// Random logits over a real vocabulary, masked: the trie-walk mask equals the scalar reference along the way, and
// the output (finished by the quick completion after 120 tokens, as the engine's wrap-up does) validates.
void decode_on(const Tokenizer& tokenizer, const json& schema, int seeds) {
  auto g = Grammar::from_json_schema(schema);
  ASSERT_TRUE(g) << g.error().message;
  const VocabBytes vocab(tokenizer);
  TokenMasker masker;
  std::vector<uint8_t> allowed;
  std::vector<uint8_t> reference;
  const std::vector<TokenId> stops = {tokenizer.eos()};
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937 rng(seed);
    GrammarState state = g->start();
    std::string out;
    for (int step = 0; step < 120 && !Grammar::is_terminal(state); ++step) {
      ASSERT_GT(masker.compute(*g, state, vocab, stops, allowed), 0) << "stuck after " << out;
      if (step % 10 == 0) {
        compute_token_mask_reference(*g, state, vocab, stops, reference);
        ASSERT_EQ(allowed, reference) << "after " << out;
      }
      std::uniform_real_distribution<float> logit(0.f, 1.f);
      int32_t best = -1;
      float best_logit = -1;
      for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
        const float x = logit(rng);
        if (allowed[t] && x > best_logit && TokenId{t} != tokenizer.eos()) {
          best = t;
          best_logit = x;
        }
      }
      if (best < 0) break;  // only the stop token is left: the output is whole
      ASSERT_TRUE(g->advance(state, vocab.piece(TokenId{best})));
      out += vocab.piece(TokenId{best});
    }
    auto rest = g->quick_completion(state, 4096);
    ASSERT_TRUE(rest.has_value()) << out;
    out += *rest;
    const json parsed = json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
    EXPECT_TRUE(test::validates_schema(parsed, schema)) << out;
  }
}

TEST(SchemaWalk, MasksOnQwenLlama3AndGemmaVocabsMatchTheReferenceAndOutputsValidate) {
  for (const char* vocab :
       {"vocab/ggml-vocab-qwen2.gguf", "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-gemma3.gguf"}) {
    SCOPED_TRACE(vocab);
    const Tokenizer& tok = test::cached_tokenizer(vocab);
    decode_on(tok, kZod, 2);
    decode_on(tok, kPydantic, 1);
  }
}

}  // namespace
}  // namespace hearth

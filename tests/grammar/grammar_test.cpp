// Grammar (grammar/grammar.h) and token masks (grammar/token_mask.h): the language of a schema, the keywords refused,
// the trie-walk masks against the scalar reference on real vocabularies, and random-logits decoding whose every
// output parses and validates.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include <random>

#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer_test_util.h"

namespace hearth {
namespace {

using nlohmann::json;

bool accepts(const Grammar& g, std::string_view text) {
  GrammarState s = g.start();
  return g.advance(s, text) && g.can_end(s);
}

bool accepts_prefix(const Grammar& g, std::string_view text) {
  GrammarState s = g.start();
  return g.advance(s, text);
}

Grammar schema_grammar(const json& schema) {
  auto g = Grammar::from_json_schema(schema);
  EXPECT_TRUE(g) << (g ? "" : g.error().message);
  return std::move(*g);
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// The test's own validator for the supported subset.
bool validates(const json& v, const json& schema) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found |= e == v;
    if (!found) return false;
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const json& t : types) {
      ok |= (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
            (t == "number" && v.is_number()) || (t == "integer" && v.is_number_integer()) ||
            (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
    }
    if (!ok) return false;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!validates(x, props[k])) return false;
      } else if (schema.value("additionalProperties", json(true)) == false) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < schema.value("minItems", 0u) || v.size() > schema.value("maxItems", 1u << 30)) return false;
    if (schema.contains("items")) {
      for (const json& x : v) {
        if (!validates(x, schema["items"])) return false;
      }
    }
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (n < schema.value("minLength", 0u) || n > schema.value("maxLength", 1u << 30)) return false;
  }
  return true;
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "pet": {"enum": ["cat", "dog", null, 3]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    "home": {"type": ["string", "null"], "maxLength": 8},
    "ok": {"type": "boolean"},
    "extra": {"type": "object", "properties": {"k": {"const": "v"}}, "required": ["k"], "additionalProperties": false}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})");

TEST(Grammar, AcceptsExactlyTheCompactJsonTheSchemaAllows) {
  const Grammar g = schema_grammar(kPerson);
  struct Case {
    const char* text;
    bool whole;
  };
  const Case cases[] = {
      {R"({"name":"Ann","age":7})", true},
      {R"({"age":-12,"name":"Bo","pet":null,"ok":true})", true},
      {R"({"name":"é€😀","age":0,"height":-1.5e+3,"tags":["a","bb"],"home":null,"extra":{"k":"v"}})", true},
      {R"({"name":"a\"b\\n","age":1,"pet":3})", true},
      {R"({"name":"Ann"})", false},                                   // age is required
      {R"({"name":"Ann","age":7,"name":"B"})", false},                // a key twice
      {R"({"name":"Ann","age":07})", false},                          // leading zero
      {R"({"name":"Ann","age":7.5})", false},                         // integer
      {R"({"name":"Ann","age":7,"x":1})", false},                     // additionalProperties false
      {R"({"name":"Ann","age":7,"pet":"bird"})", false},              // enum
      {R"({"name":"0123456789abc","age":7})", false},                 // maxLength 12
      {R"({"name":"Ann","age":7,"tags":["a","b","c","d"]})", false},  // maxItems 3
      {R"({"name": "Ann","age":7})", false},                          // no whitespace outside strings
      {R"({"name":"\u0041","age":7})", false},                        // no \u escapes
      {R"({"name":"Ann","age":7,"extra":{}})", false},                // extra.k is required
      {"{\"name\":\"\xC0\xAF\",\"age\":7}", false},                   // an overlong UTF-8 form
      {R"({"name":"Ann","age":7}x)", false},                          // nothing after the value
  };
  for (const Case& c : cases) {
    EXPECT_EQ(accepts(g, c.text), c.whole) << c.text;
    if (c.whole) {
      EXPECT_TRUE(validates(json::parse(c.text), kPerson)) << c.text;
    }
  }
  EXPECT_TRUE(accepts_prefix(g, R"({"name":"Ann","ag)"));
  EXPECT_FALSE(accepts_prefix(g, R"({"nam3)"));
}

TEST(Grammar, TopLevelNumbersLiteralsAndAnyJsonObject) {
  const Grammar num = schema_grammar(json{{"type", "number"}});
  GrammarState s = num.start();
  ASSERT_TRUE(num.advance(s, "12"));
  EXPECT_TRUE(num.can_end(s));
  EXPECT_FALSE(Grammar::is_terminal(s));  // "123" may follow
  const Grammar obj = Grammar::any_json_object();
  EXPECT_TRUE(accepts(obj, R"({"a":[1,{"b":null},"x",true,-0.5],"c":{}})"));
  EXPECT_FALSE(accepts(obj, "[1]"));  // json_object: an object at the top
  EXPECT_FALSE(accepts(obj, R"({"a":tru})"));
  GrammarState t = obj.start();
  ASSERT_TRUE(obj.advance(t, "{}"));
  EXPECT_TRUE(Grammar::is_terminal(t));
}

TEST(Grammar, RefusesWhatItDoesNotSupportNamingTheKeyword) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})", "'not'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"array","prefixItems":[{"type":"string"}]})", "'prefixItems'"},
      {R"({"if":{"type":"string"}})", "'if'"},
      {R"({"type":"string","format":"uri"})", "\"uri\""},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "\"b\""},
      {R"({"type":"strin"})", "\"strin\""},
      {"false", "false"},
  };
  for (const auto& [schema, needle] : cases) {
    auto g = Grammar::from_json_schema(json::parse(schema));
    ASSERT_FALSE(g) << schema;
    EXPECT_NE(g.error().message.find(needle), std::string::npos) << g.error().message;
  }
}

// Compiling is linear in the schema, or refuses by count first: an enum of 600k values (4 MiB, the body limit) took
// 27 s to de-duplicate before its "at most 64" check; the walk now stops at the 65th distinct value.
TEST(Grammar, HugeSchemasAreRefusedByCountWithTheLimitNamed) {
  auto timed = [](const json& schema) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = Grammar::from_json_schema(schema);
    return std::pair{std::move(g), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)};
  };
  json distinct = json::array();
  for (int i = 0; i < 600'000; ++i) distinct.push_back(i);
  auto [g, ms] = timed(json{{"enum", distinct}});
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().message, "'schema.enum' has more than 64 distinct values; at most 64 are supported");
  EXPECT_LT(ms.count(), 100);

  // The same behind a "type" array of 600k repeated names (each value was checked against every name).
  json types = json::array();
  for (int i = 0; i < 600'000; ++i) types.push_back("integer");
  std::tie(g, ms) = timed(json{{"type", types}, {"enum", distinct}});
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().message, "'schema.enum' has more than 64 distinct values; at most 64 are supported");
  EXPECT_LT(ms.count(), 2000);  // one linear pass (a few ms in Release; the sanitizer build is far slower)

  // 600k values of 3 distinct ones are fine: de-duplicated in one pass, to 3 literals.
  json repeated = json::array();
  for (int i = 0; i < 600'000; ++i) repeated.push_back(i % 3);
  std::tie(g, ms) = timed(json{{"enum", repeated}});
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->nodes().back().literals, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_LT(ms.count(), 2000);  // one linear pass, as above

  // 3 levels of 41 properties: 70,644 nodes, past the 16-bit node ids; refused at the node that crosses the budget.
  json leaf = {{"type", "string"}};
  auto level = [](const json& child) {
    json props = json::object();
    for (int i = 0; i < 41; ++i) props["p" + std::to_string(i)] = child;
    return json{{"type", "object"}, {"properties", props}};
  };
  std::tie(g, ms) = timed(level(level(level(leaf))));
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("is too large: at most 65535 grammar nodes are supported"), std::string::npos)
      << g.error().message;
}

// Error paths are rendered only on error: a deep schema of long property names compiles without copying them per
// level, and an error deep inside names its whole path.
TEST(Grammar, ADeepSchemaNamesTheWholePathOfAnError) {
  json schema = {{"type", "string"}, {"contentEncoding", "base64"}};
  for (int i = 0; i < 3; ++i) schema = {{"type", "object"}, {"properties", {{"k" + std::to_string(i), schema}}}};
  auto g = Grammar::from_json_schema(schema);
  ASSERT_FALSE(g);
  EXPECT_TRUE(g.error().message.starts_with(
      "JSON Schema keyword 'contentEncoding' (at 'schema.properties.k2.properties.k1.properties.k0') is not supported"))
      << g.error().message;
}

TEST(Grammar, ToolCallBranchesChooseTheToolByName) {
  std::vector<Grammar::Branch> branches = {
      {R"({"name": "lights_on", "arguments": )", json::parse(R"({"type":"object","properties":{"room":
        {"enum":["kitchen","hall"]}},"required":["room"]})"),
       "}"},
      {R"({"name": "lights_off", "arguments": )", json::object(), "}"},
  };
  auto g = Grammar::branches(branches);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(*g, R"({"name": "lights_on", "arguments": {"room":"hall"}})"));
  EXPECT_TRUE(accepts(*g, R"({"name": "lights_off", "arguments": {"any":[1]}})"));
  EXPECT_FALSE(accepts(*g, R"({"name": "lights_on", "arguments": {"room":"attic"}})"));
  EXPECT_FALSE(accepts(*g, R"({"name": "heater", "arguments": {}})"));
}

// Random logits, masked, sampled: every whole output parses and validates; along the way the trie-walk mask
// equals the scalar reference.
void random_decode(const Tokenizer& tokenizer, const json& schema, int seeds, int reference_steps) {
  const Grammar g = schema_grammar(schema);
  const VocabBytes vocab(tokenizer);
  TokenMasker masker;
  std::vector<uint8_t> allowed;
  std::vector<uint8_t> reference;
  const std::vector<TokenId> stops = {tokenizer.eos()};
  int compared = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937 rng(seed);
    GrammarState state = g.start();
    std::string out;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      const int32_t n = masker.compute(g, state, vocab, stops, allowed);
      ASSERT_GT(n, 0) << "stuck after " << out;
      if (compared < reference_steps) {
        compute_token_mask_reference(g, state, vocab, stops, reference);
        ASSERT_EQ(allowed, reference) << "after " << out;
        ++compared;
      }
      // A random logit per allowed token; the best one wins (a random-logits greedy sampler).
      std::uniform_real_distribution<float> logit(0.f, 1.f);
      int32_t best = -1;
      float best_logit = -1;
      for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
        const float x = logit(rng);
        if (allowed[t] && x > best_logit) {
          best = t;
          best_logit = x;
        }
      }
      if (TokenId{best} == tokenizer.eos()) {
        ended = true;
        break;
      }
      ASSERT_TRUE(g.advance(state, vocab.piece(TokenId{best})));
      out += vocab.piece(TokenId{best});
      ended = Grammar::is_terminal(state);
    }
    ASSERT_TRUE(ended) << "seed " << seed << " did not finish: " << out;
    const json parsed = json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
    EXPECT_TRUE(validates(parsed, schema)) << out;
  }
}

const json kBounded = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
    "mood": {"enum": ["happy", "sad"]},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "mood"],
  "additionalProperties": false
})");

// The quick completion of every prefix the random decoder reaches ends the output whole and valid, and it is
// deterministic: from the state after any prefix of it, the rest of it is the completion.
void check_quick_completions(const Tokenizer& tokenizer, const json& schema, int seeds) {
  const Grammar g = schema_grammar(schema);
  const VocabBytes vocab(tokenizer);
  TokenMasker masker;
  std::vector<uint8_t> allowed;
  int checked = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937 rng(seed);
    GrammarState state = g.start();
    std::string out;
    for (int step = 0; step < 60 && !Grammar::is_terminal(state); ++step) {
      const auto rest = g.quick_completion(state, 4096);
      ASSERT_TRUE(rest) << "no completion after " << out;
      GrammarState end = state;
      ASSERT_TRUE(g.advance(end, *rest)) << out << " + " << *rest;
      ASSERT_TRUE(g.can_end(end)) << out << " + " << *rest;
      const json parsed = json::parse(out + *rest, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << out + *rest;
      EXPECT_TRUE(validates(parsed, schema)) << out + *rest;
      for (size_t k = 1; k < rest->size(); k += 3) {
        GrammarState mid = state;
        ASSERT_TRUE(g.advance(mid, std::string_view(*rest).substr(0, k)));
        EXPECT_EQ(g.quick_completion(mid, 4096), rest->substr(k)) << out << " + " << rest->substr(0, k);
      }
      ++checked;
      // A uniformly random allowed token (no stop token: the output goes on).
      masker.compute(g, state, vocab, {}, allowed);
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
        if (allowed[t]) ok.push_back(t);
      }
      ASSERT_FALSE(ok.empty()) << out;
      const int32_t t = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      ASSERT_TRUE(g.advance(state, vocab.piece(TokenId{t})));
      out += vocab.piece(TokenId{t});
    }
  }
  EXPECT_GT(checked, seeds * 10);
}

const json kUnbounded = json::parse(R"({
  "type": "object",
  "properties": {
    "note": {"type": "string"},
    "code": {"type": "string", "minLength": 3},
    "n": {"type": "number"},
    "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
             "minItems": 2},
    "any": {},
    "choice": {"enum": ["zebra", "yak"]}
  },
  "required": ["note", "code", "list", "choice"],
  "additionalProperties": false
})");

TEST(Grammar, QuickCompletionEndsEveryPrefixWholeAndValid) {
  check_quick_completions(test::stories(), kUnbounded, 12);
  check_quick_completions(test::stories(), kPerson, 12);
  check_quick_completions(test::cached_tokenizer("vocab/ggml-vocab-llama-bpe.gguf"), kUnbounded, 4);
  // A whole output needs nothing more; the start of one needs all of its shortest form.
  const Grammar g = schema_grammar(kBounded);
  GrammarState s = g.start();
  EXPECT_EQ(g.quick_completion(s, 4096), R"({"age":0,"mood":"happy","name":""})");  // the grammar's key order
  EXPECT_EQ(g.quick_completion(s, 10), std::nullopt);
  ASSERT_TRUE(g.advance(s, R"({"age":0,"mood":"happy","name":""})"));
  EXPECT_EQ(g.quick_completion(s, 4096), "");
}

TEST(TokenMask, AllowPrefixesOfMarksExactlyTheTokensThatArePrefixes) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-llama-bpe.gguf");
  const VocabBytes vocab(tok);
  std::vector<uint8_t> allowed;
  for (const std::string bytes : {R"(","age":0})", "\"}]", "ing things", "", "\xff\xfe"}) {
    const int32_t n = vocab.allow_prefixes_of(bytes, allowed);
    int32_t expected = 0;
    for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
      const std::string& p = vocab.piece(TokenId{t});
      const bool prefix = !p.empty() && p.size() <= bytes.size() && bytes.compare(0, p.size(), p) == 0;
      EXPECT_EQ(allowed[t] != 0, prefix) << "token " << t << " '" << p << "' for '" << bytes << "'";
      expected += prefix;
    }
    EXPECT_EQ(n, expected) << bytes;
  }
}

TEST(TokenMask, RandomLogitsOnLlama3VocabGiveValidJsonAndMasksMatchTheReference) {
  random_decode(test::cached_tokenizer("vocab/ggml-vocab-llama-bpe.gguf"), kBounded, 8, 12);
}

TEST(TokenMask, RandomLogitsOnSentencePieceByteFallbackVocabsGiveValidJson) {
  random_decode(test::cached_tokenizer("vocab/ggml-vocab-llama-spm.gguf"), kBounded, 8, 12);
  random_decode(test::stories(), kBounded, 20, 40);
}

TEST(TokenMask, PlainStringFastPathEqualsTheReferenceUnderMaxLength) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-qwen2.gguf");
  const VocabBytes vocab(tok);
  const Grammar g = schema_grammar(json::parse(R"({"type":"string","maxLength":3})"));
  TokenMasker masker;
  std::vector<uint8_t> allowed, reference;
  for (std::string_view prefix : {"\"", "\"a", "\"ab", "\"abc", "\"\xE4"}) {
    GrammarState s = g.start();
    ASSERT_TRUE(g.advance(s, prefix));
    masker.compute(g, s, vocab, {}, allowed);
    compute_token_mask_reference(g, s, vocab, {}, reference);
    EXPECT_EQ(allowed, reference) << prefix;
  }
}

// A Gemma 4 string short of its minLength after a '<' (text, since "<|" would close it): the quick completion
// writes within maxLength whichever reading survives, for every length and every anyOf of two string lengths.
TEST(Grammar, Gemma4QuickCompletionKeepsAStringWithinItsLengths) {
  for (int len = 1; len <= 4; ++len) {
    const json params = {{"type", "object"},
                         {"properties",
                          {{"s", {{"type", "string"}, {"minLength", len}, {"maxLength", len}}},
                           {"t",
                            {{"anyOf", json::array({{{"type", "string"}, {"maxLength", 1}},
                                                    {{"type", "string"}, {"minLength", len + 2}}})}}}}},
                         {"required", {"s", "t"}}};
    auto g = Grammar::branches({{"call:f", params, "."}}, GrammarSyntax::kGemma4);
    ASSERT_TRUE(g) << g.error().message;
    for (const std::string& prefix : {std::string("call:f{s:<|\"|>"), std::string("call:f{s:<|\"|><"),
                                      std::string(len > 1 ? "call:f{s:<|\"|>x<" : "call:f{s:<|\"|><"),
                                      "call:f{s:<|\"|>" + std::string(len, 'x') + "<|\"|>,t:<|\"|><"}) {
      GrammarState s = g->start();
      ASSERT_TRUE(g->advance(s, prefix)) << prefix;
      auto rest = g->quick_completion(s, 256);
      ASSERT_TRUE(rest) << prefix;
      ASSERT_TRUE(g->advance(s, *rest)) << prefix << *rest;
      EXPECT_TRUE(Grammar::is_terminal(s)) << prefix << *rest;
    }
  }
}

// Gemma 4's call syntax (GrammarSyntax::kGemma4) on Gemma 3's vocabulary, which Gemma 4 shares: its strings take
// the walk, never the plain-text fast path (a plain token may hold "<|", which ends the string), and the walked mask
// equals the byte-by-byte reference inside strings, keys and values; random logits reach a whole call.
TEST(TokenMask, Gemma4SyntaxMasksMatchTheReference) {
  const Tokenizer& tok = test::cached_tokenizer("vocab/ggml-vocab-gemma3.gguf");
  const VocabBytes vocab(tok);
  const json params = json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 6}, "days": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}},
    "required": ["city", "days", "tags"], "additionalProperties": false})");
  auto g = Grammar::branches({{"<|tool_call>call:f", params, "<tool_call|>"}}, GrammarSyntax::kGemma4);
  ASSERT_TRUE(g) << g.error().message;
  GrammarState in_string = g->start();
  ASSERT_TRUE(g->advance(in_string, "<|tool_call>call:f{city:<|\"|>a"));
  int32_t room = 0;
  EXPECT_FALSE(g->in_plain_string(in_string, &room));
  TokenMasker masker;
  std::vector<uint8_t> allowed, reference;
  for (int seed = 0; seed < 2; ++seed) {
    std::mt19937 rng(seed);
    GrammarState state = g->start();
    std::string out;
    for (int step = 0; step < 120 && !Grammar::is_terminal(state); ++step) {
      ASSERT_GT(masker.compute(*g, state, vocab, {}, allowed), 0) << "stuck after " << out;
      if (step % 4 == 0) {
        compute_token_mask_reference(*g, state, vocab, {}, reference);
        ASSERT_EQ(allowed, reference) << "after " << out;
      }
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab.vocab_size(); ++t) {
        if (allowed[t]) ok.push_back(t);
      }
      const int32_t pick = ok[rng() % ok.size()];
      ASSERT_TRUE(g->advance(state, vocab.piece(TokenId{pick})));
      out += vocab.piece(TokenId{pick});
    }
    EXPECT_TRUE(Grammar::is_terminal(state)) << "seed " << seed << ": " << out;
    EXPECT_TRUE(out.starts_with("<|tool_call>call:f{") && out.ends_with("}<tool_call|>")) << out;
  }
}

}  // namespace
}  // namespace hearth

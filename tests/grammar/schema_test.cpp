// The JSON Schema keywords beyond types and properties (grammar/grammar.h): for each, strings the automaton takes
// whole and strings it refuses; the refusals that name what is unsupported; hostile schemas refused by count, fast.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "grammar/byte_dfa.h"
#include "grammar/grammar.h"
#include "grammar/schema_validator.h"

namespace hearth {
namespace {

using nlohmann::json;

bool accepts(const Grammar& g, std::string_view text) {
  GrammarState s = g.start();
  return g.advance(s, text) && g.can_end(s);
}

Grammar compile(std::string_view schema) {
  auto g = Grammar::from_json_schema(json::parse(schema));
  EXPECT_TRUE(g) << schema << ": " << (g ? "" : g.error().message);
  return g ? std::move(*g) : Grammar::any_json_object();
}

struct KeywordCase {
  const char* schema;
  std::vector<const char*> yes;
  std::vector<const char*> no;
};

// Every accepted text also passes the test's own validator; every refused one is refused by the grammar only.
void check_cases(const std::vector<KeywordCase>& cases) {
  for (const KeywordCase& c : cases) {
    const Grammar g = compile(c.schema);
    const json schema = json::parse(c.schema);
    for (const char* text : c.yes) {
      EXPECT_TRUE(accepts(g, text)) << c.schema << " should accept " << text;
      EXPECT_TRUE(test::validates_schema(json::parse(text), schema)) << c.schema << " validator refuses " << text;
    }
    for (const char* text : c.no) EXPECT_FALSE(accepts(g, text)) << c.schema << " should refuse " << text;
  }
}

TEST(Schema, PatternCompilesTheRegexSubsetAnchored) {
  check_cases({
      {R"({"type":"string","pattern":"^[A-Z]{3}-\\d{3}$"})",
       {R"("ABC-123")"},
       {R"("AB-123")", R"("abc-123")", R"("ABC-1234")"}},
      {R"({"pattern":"(ab|cd)+x?"})", {R"("ab")", R"("abcdab")", R"("cdx")"}, {R"("")", R"("abx x")", R"("ac")"}},
      {R"({"type":"string","pattern":"^a.c$"})",
       {R"("abc")",
        "\"a\xC3\xA9"
        "c\"",
        R"("a c")"},
       {R"("ac")", R"("a\"c")"}},
      {R"({"type":"string","pattern":"[^0-9]+"})", {R"("ab")", "\"\xE2\x82\xAC\""}, {R"("a1")", R"("")"}},
      {R"({"type":"string","pattern":"^\\w+\\s\\w*$"})", {R"("a_1 ")", R"("x y")"}, {R"("a-b c")"}},
      {R"({"type":"string","pattern":"^[a-c\\d.]{2,3}?$"})",
       {R"("a.")", R"("b9c")"},
       {R"("a")", R"("abcd")", R"("d1")"}},
      {R"({"type":"string","pattern":"^x\\{\\}\\.y$"})", {R"("x{}.y")"}, {R"("x{}zy")"}},
  });
}

TEST(Schema, PatternRefusesWhatItCannotCompileNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","pattern":"^a\\bc"})", "'\\b'"},
      {R"({"type":"string","pattern":"(?=a)b"})", "a lookahead"},
      {R"({"type":"string","pattern":"(?<n>a)b"})", "a named group"},
      {R"({"type":"string","pattern":"(a)\\1"})", "'\\1'"},
      {R"({"type":"string","pattern":"a{1001}"})", "a repeat bound over 1000"},
      {R"({"type":"string","pattern":"a\"b"})", "must be escaped in JSON"},
      {R"({"type":"string","pattern":"a\\nb"})", "control character"},
      {R"({"type":"string","pattern":"a^b"})", "an anchor inside the pattern"},
      {R"({"type":"string","pattern":"(ab"})", "an unclosed '('"},
      {R"({"type":"string","pattern":"[é]"})", "a non-ASCII character inside [...]"},
      {R"({"type":"string","pattern":"^a$","maxLength":0})", "no string the grammar can write"},
      {R"({"type":"string","format":"uri"})", "'schema.format' \"uri\" is not supported"},
  };
  for (const auto& [schema, needle] : cases) {
    auto g = Grammar::from_json_schema(json::parse(schema));
    ASSERT_FALSE(g) << schema;
    EXPECT_NE(g.error().message.find(needle), std::string::npos) << schema << ": " << g.error().message;
  }
}

TEST(Schema, FormatsAreAutomataOfValidValues) {
  check_cases({
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-28")", R"("1999-12-31")", R"("2023-04-30")"},
       {R"("2024-02-30")", R"("2024-13-01")", R"("2024-04-31")", R"("2024-2-01")", R"("24-02-01")"}},
      {R"({"type":"string","format":"time"})",
       {R"("12:30:00Z")", R"("23:59:59.5+02:00")", R"("00:00:00-11:30")"},
       {R"("24:00:00Z")", R"("12:30:00")", R"("12:60:00Z")", R"("12:30Z")"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-01-31T08:00:00Z")", R"("2024-06-30T23:59:59.123456+05:30")"},
       {R"("2024-01-31 08:00:00Z")", R"("2024-06-31T08:00:00Z")"}},
      {R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123E4567-E89B-12D3-A456-42661417400")"}},
      {R"({"type":"string","format":"email"})",
       {R"("ann@example.com")", R"("a.b+c_d@mail.example.co")", R"("x-y@a-b.io")"},
       {R"("ann@example")", R"("@example.com")", R"("a..b@example.com")", R"("ann@-x.com")", R"("ann@x.c")"}},
      {R"({"type":"string","format":"ipv4"})",
       {R"("192.168.0.1")", R"("0.0.0.0")"},
       {R"("256.1.1.1")", R"("01.1.1.1")"}},
      // zod's email and uuid: format and pattern together are both enforced.
      {R"({"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567-e89b-02d3-a456-426614174000")", R"("123e4567-e89b-12d3-c456-426614174000")"}},
  });
}

TEST(Schema, LengthsBesidePatternAreExactInCodePoints) {
  check_cases({
      {R"({"type":"string","pattern":"^(?:[a-z]|é)+$","minLength":2,"maxLength":3})",
       {R"("ab")", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"", R"("abc")"},
       {R"("a")", R"("abcd")", "\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\""}},
      {R"({"type":"string","format":"email","maxLength":8})", {R"("a@b.io")"}, {R"("ann@example.com")"}},
  });
}

TEST(Schema, IntegerBoundsAreExact) {
  const char* const schemas[] = {
      R"({"type":"integer","minimum":-15,"maximum":120})",
      R"({"type":"integer","exclusiveMinimum":-15.5,"exclusiveMaximum":99})",
      R"({"type":"integer","minimum":3,"exclusiveMinimum":true,"maximum":7.5})",
      R"({"type":"integer","minimum":-300,"maximum":-7})",
      R"({"type":"integer","minimum":0,"maximum":100,"multipleOf":7})",
      R"({"type":"integer","minimum":-50,"multipleOf":12})",
      R"({"type":"number","minimum":-20,"maximum":30,"multipleOf":5})",
  };
  for (const char* text : schemas) {
    const json schema = json::parse(text);
    const Grammar g = compile(text);
    for (int v = -1200; v <= 1200; ++v) {
      EXPECT_EQ(accepts(g, std::to_string(v)), test::validates_schema(json(v), schema)) << text << " at " << v;
    }
    EXPECT_FALSE(accepts(g, "-0")) << text;
    EXPECT_FALSE(accepts(g, "007")) << text;
  }
  // Unbounded above: 15 digits at most, as every number of the grammar.
  const Grammar big = compile(R"({"type":"integer","minimum":5})");
  EXPECT_TRUE(accepts(big, "999999999999999"));
  EXPECT_FALSE(accepts(big, "1000000000000000"));
  EXPECT_FALSE(accepts(big, "4"));
}

TEST(Schema, NumberBoundsProduceOnlyValuesInRange) {
  check_cases({
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "1", "0.5", "0.000001"},
       {"1.5", "-0.1", "2", "1e0", "-1", "0.50", "1.0"}},
      {R"({"type":"number","minimum":-2.5,"exclusiveMaximum":3})",
       {"-2", "-1.75", "2.999", "0"},
       {"3", "-2.6", "3.0", "-3"}},
      {R"({"type":"number","exclusiveMinimum":0})", {"1", "0.5", "123.25"}, {"0", "-0.5", "0.0"}},
  });
  EXPECT_FALSE(Grammar::from_json_schema(json::parse(R"({"type":"number","multipleOf":0.01})")));
  EXPECT_FALSE(Grammar::from_json_schema(json::parse(R"({"type":"integer","minimum":5,"maximum":4})")));
}

TEST(Schema, AnyOfFollowsAlternativesThatBeginAlike) {
  check_cases({
      {R"({"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},
                    {"type":"object","properties":{"b":{"type":"number"}},"required":["b"],"additionalProperties":false},
                    {"const":"a"}]})",
       {R"({"a":"x"})", R"({"b":1.5})", R"("a")"},
       {R"({"a":1})", R"({"b":"x"})", R"({})", R"({"a":"x","b":1})", R"("b")"}},
      {R"({"oneOf":[{"type":"object","properties":{"type":{"const":"a"},"a":{"type":"string"}},"required":["type","a"],"additionalProperties":false},
                    {"type":"object","properties":{"type":{"const":"b"},"b":{"type":"integer"}},"required":["type","b"],"additionalProperties":false}]})",
       {R"({"type":"a","a":"x"})", R"({"type":"b","b":2})"},
       {R"({"type":"a","b":2})", R"({"type":"c","a":"x"})"}},
      {R"({"type":"string","nullable":true,"maxLength":2})", {R"("ab")", "null"}, {R"("abc")", "1"}},
      {R"({"type":["integer","null"],"minimum":1,"maximum":3})", {"1", "3", "null"}, {"0", "4", "1.5"}},
      {R"({"anyOf":[{"type":"string","maxLength":1},{"type":"string","pattern":"^zz+$"}]})",
       {R"("a")", R"("zzz")", R"("")"},
       {R"("ab")", R"("zza")"}},
      {R"({"allOf":[{"type":"integer","maximum":2}],"description":"d"})", {"2", "-1"}, {"3"}},
  });
}

TEST(Schema, RefsResolveAndRecursionIsBounded) {
  const char* tree = R"({"type":"object","properties":{"name":{"type":"string"},
      "children":{"type":"array","items":{"$ref":"#"}}},"required":["name","children"],"additionalProperties":false})";
  const Grammar g = compile(tree);
  std::string nested = R"({"name":"leaf","children":[]})";
  for (int depth = 1; depth <= kMaxRefDepth + 1; ++depth) {  // the root, then kMaxRefDepth expansions of "#"
    EXPECT_TRUE(accepts(g, nested)) << depth;
    nested = R"({"name":"n","children":[)" + nested + "]}";
  }
  EXPECT_FALSE(accepts(g, nested));  // one level past the bound: only an empty children array is left there
  check_cases({
      {R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer","minimum":0}},"required":["x"],"additionalProperties":false}},
          "type":"object","properties":{"a":{"$ref":"#/$defs/pt"},"b":{"$ref":"#/$defs/pt","description":"d"}},"additionalProperties":false})",
       {R"({"a":{"x":1},"b":{"x":0}})", R"({})"},
       {R"({"a":{"x":-1}})"}},
      {R"({"definitions":{"s":{"type":"string","format":"date"}},"type":"array","items":{"$ref":"#/definitions/s"},"maxItems":2})",
       {R"(["2020-01-01"])", "[]"},
       {R"(["2020-01-32"])"}},
  });
  const std::pair<const char*, const char*> refused[] = {
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"$ref":"https://example.com/s.json"})", "only references into this schema"},
      {R"({"$ref":"#","type":"object"})", "'type' beside '$ref'"},
      {R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})", "recursive $ref"},
      {R"({"allOf":[{"type":"string"},{"maxLength":2}]})", "allOf' of more than one"},
  };
  for (const auto& [schema, needle] : refused) {
    auto r = Grammar::from_json_schema(json::parse(schema));
    ASSERT_FALSE(r) << schema;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }
}

TEST(Schema, AdditionalPropertiesAsASchemaAndPropertyNames) {
  check_cases({
      {R"({"type":"object","additionalProperties":{"type":"integer","minimum":0}})",
       {R"({"x":1,"y":22})", "{}"},
       {R"({"x":-1})", R"({"x":"a"})"}},
      {R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$"},"additionalProperties":{"type":"boolean"}})",
       {R"({"ab":true,"c":false})"},
       {R"({"A":true})", R"({"":true})"}},
      {R"({"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":{"type":"string"}})",
       {R"({"a":null})"},
       {R"({"a":"x"})"}},
  });
}

// A hostile schema holds the compiling thread briefly and is refused naming its limit.
TEST(Schema, HostileSchemasAreRefusedFastByCount) {
  auto timed = [](const json& schema) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = Grammar::from_json_schema(schema);
    return std::pair{std::move(g), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)};
  };
  json fan = json::array();
  for (int i = 0; i < 64; ++i) fan.push_back(json{{"$ref", "#/$defs/a"}});
  const std::pair<json, const char*> cases[] = {
      {json{{"$defs", {{"a", {{"anyOf", fan}}}}}, {"$ref", "#/$defs/a"}}, "schema visits"},
      {json{{"type", "string"}, {"pattern", "(a|b)*a(a|b){14}"}}, "automaton is too large"},
      {json{{"type", "string"}, {"pattern", "((((a{1000}){1000}){1000}){1000})"}}, "too large"},
      {json{{"type", "string"}, {"pattern", "^[a-z]+$"}, {"maxLength", 5000}}, "above 1000"},
  };
  for (const auto& [schema, needle] : cases) {
    auto [g, ms] = timed(schema);
    ASSERT_FALSE(g) << schema.dump().substr(0, 200);
    EXPECT_NE(g.error().message.find(needle), std::string::npos) << g.error().message;
    EXPECT_LT(ms.count(), 3000) << g.error().message;
  }
  // Many distinct automata: refused by the grammar's total of automaton states.
  json props = json::object();
  for (int i = 0; i < 64; ++i)
    props["p" + std::to_string(i)] = {{"type", "string"},
                                      {"pattern", fmt::format("^[a-z]{{{}}}[0-9]{{0,1000}}[A-Z]{{0,1000}}$", i + 1)}};
  auto [g, ms] = timed(json{{"type", "object"}, {"properties", props}});
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("automaton states in all"), std::string::npos) << g.error().message;
  EXPECT_LT(ms.count(), 5000);
}

}  // namespace
}  // namespace hearth

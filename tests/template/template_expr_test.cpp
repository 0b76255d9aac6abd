// Unit tests of the template language: expressions, statements, whitespace control, errors and guards.
#include <gtest/gtest.h>

#include "template/chat_template.h"

namespace hearth {
namespace {

using nlohmann::json;

std::string render(std::string_view source, const json& extra = json::object()) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  if (!t.ok()) return "PARSE ERROR: " + t.error().message;
  Result<std::string> out = t->render(json::array(), nullptr, false, "<s>", "</s>", extra);
  if (!out.ok()) return "RENDER ERROR: " + out.error().message;
  return *out;
}

struct Case {
  const char* source;
  const char* expected;
};

void check_cases(const std::vector<Case>& cases, const json& extra = json::object()) {
  for (const Case& c : cases) EXPECT_EQ(render(c.source, extra), c.expected) << "template: " << c.source;
}

TEST(TemplateExpr, LiteralsAndPrinting) {
  check_cases({
      {"{{ 42 }}|{{ -7 }}|{{ 1.5 }}|{{ 2.0 }}|{{ 1e3 }}", "42|-7|1.5|2.0|1000.0"},
      {"{{ 0.0001 }} {{ 0.00001 }} {{ 1e16 }} {{ 123.25 }} {{ -0.5 }} {{ 1e15 }} {{ 0.1 + 0.2 }}",
       "0.0001 1e-05 1e+16 123.25 -0.5 1000000000000000.0 0.30000000000000004"},
      {"{{ 'a\\'b' }}{{ \"c\\nd\" }}{{ '\\u00e9' }}", "a'bc\nd\xc3\xa9"},
      {"{{ true }} {{ false }} {{ none }} {{ True }} {{ None }}", "True False None True None"},
      {"{{ [1, 'a', none, true] }}", "[1, 'a', None, True]"},
      {"{{ {'k': 'v', 'n': 1} }}", "{'k': 'v', 'n': 1}"},
      {"{{ (1, 2) }}", "(1, 2)"},
      {"{{ (1,) }} {{ (1, 2) == [1, 2] }}", "(1,) False"},
      {"{{ \"it's\" | string }} {{ ['it\\'s'] }}", "it's [\"it's\"]"},
      {"{{ undefined_thing }}[{{ x.y }}]", "[]"},
  });
}

TEST(TemplateExpr, Arithmetic) {
  check_cases({
      {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}", "7 9 3 -4 1 2"},
      {"{{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }}", "3.5 3.0 1024 2.5"},
      {"{{ 'ab' + 'cd' }} {{ 'ab' ~ 1 ~ none }} {{ 'x' * 3 }} {{ [1] + [2] }}", "abcd ab1None xxx [1, 2]"},
      {"{{ 1 ~ undefined_var ~ 2 }}", "12"},
      {"{{ 9223372036854775807 + 1 }}", "9.223372036854776e+18"},
  });
  EXPECT_NE(render("{{ 'a' + 1 }}").find("unsupported operand types for +: 'str' and 'int'"), std::string::npos);
  EXPECT_NE(render("{{ 1 // 0 }}").find("division or modulo by zero"), std::string::npos);
  EXPECT_NE(render("{{ 'a' + nope }}").find("'nope' is undefined"), std::string::npos);
}

TEST(TemplateExpr, ComparisonsAndLogic) {
  check_cases({
      {"{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ true == 1 }}",
       "True False True True True True"},
      {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}", "True True True True"},
      {"{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }}|{{ not 0 }} {{ not [1] }}", "x y |True False"},
      {"{{ 'yes' if 1 else 'no' }} {{ 'yes' if [] else 'no' }}[{{ 'only' if false }}]", "yes no[]"},
      {"{{ [1, {'a': [2]}] == [1, {'a': [2]}] }} {{ {'a': 1} == {'a': 2} }}", "True False"},
      {"{% if [] %}T{% else %}F{% endif %}{% if {} %}T{% else %}F{% endif %}{% if 0.0 %}T{% else %}F{% endif %}"
       "{% if ' ' %}T{% endif %}",
       "FFFT"},
  });
}

TEST(TemplateExpr, AttributesSubscriptsSlices) {
  // nlohmann::json keeps keys sorted, so m iterates content before role.
  const json extra = {{"m", {{"role", "user"}, {"content", "hi"}}}, {"l", {1, 2, 3, 4}}, {"s", "héllo"}};
  check_cases(
      {
          {"{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} {{ l[0] }} {{ l[-1] }} {{ l[9] is defined }}",
           "user hi False 1 4 False"},
          {"{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[::2] }} {{ l[1:-1] }}",
           "[2, 3, 4] [1, 2] [4, 3, 2, 1] [3, 4] [1, 3] [2, 3]"},
          {"{{ s[1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s | length }} {{ s[:-1] }}", "é él olléh 5 héll"},
          {"{{ m.items() | list }} {{ m.keys() | list }} {{ m.get('role') }} {{ m.get('x', 'dflt') }}",
           "[('content', 'hi'), ('role', 'user')] ['content', 'role'] user dflt"},
      },
      extra);
}

TEST(TemplateExpr, StringMethods) {
  check_cases({
      {"[{{ '  a b  '.strip() }}][{{ '  a '.lstrip() }}][{{ ' a  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}]",
       "[a b][a ][ a][a]"},
      {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a<b>c<b>d'.split('<b>')[-1] }}",
       "['a', 'b', '', 'c'] ['a', 'b'] d"},
      {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'bc')) }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }}",
       "True True abc ABC"},
      {"{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aXa'.replace('a', 'b') }}", "Hello World Hello bXb"},
      {"{{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }} {{ '-'.join(['a', 'b']) }}", "2 2 a-b"},
  });
  EXPECT_NE(render("{{ 'x'.nosuch() }}").find("'nosuch' is undefined"), std::string::npos);
}

TEST(TemplateExpr, Filters) {
  const json extra = {{"msgs", {{{"role", "user"}, {"n", 1}}, {{"role", "assistant"}, {"n", 2}}, {{"role", "user"}}}}};
  check_cases(
      {
          {"[{{ '  x  ' | trim }}] {{ [1, 2] | length }} {{ 'abc' | count }} {{ 'aB' | upper }} {{ 'aB' | lower }}",
           "[x] 2 3 AB ab"},
          {"{{ nope | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ 0 | d(5, true) }}",
           "d  d 5"},
          {"{{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ [3, 1, 2] | sort }} {{ [3, 1, 2] | join(', ') }}",
           "3 2 [1, 2, 3] 3, 1, 2"},
          {"{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} "
           "{{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='n') | list }} "
           "{{ msgs | selectattr('n') | map(attribute='role') | join('/') }}",
           "2 [2] user/assistant"},
          {"{{ ['a', 'b', 'a'] | reject('equalto', 'a') | list }} {{ [1, 2, 3] | select('odd') | list }} "
           "{{ ['a', 'b'] | map('upper') | list }}",
           "['b'] [1, 3] ['A', 'B']"},
          {"{{ {'b': 1, 'a': 2} | items | list }} {{ 'ab' | list }} {{ [1, 2] | reverse | list }} {{ 'ab' | reverse }}",
           "[('b', 1), ('a', 2)] ['a', 'b'] [2, 1] ba"},
          {"{{ 'a-b-c' | replace('-', '+') }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ '42' | int + 1 }} "
           "{{ 'x' | int }} {{ '1.5' | float }} {{ -3 | abs }}",
           "a+b+c 2.57 2.0 43 0 1.5 3"},
          {"{{ 3.5 | round }} {{ 0.5 | round }} {{ 2.5 | round(method='ceil') }}", "4.0 0.0 3.0"},
          {"{{ [1, 2, 3] | sum }} {{ [3, 1] | min }} {{ [3, 1] | max }} {{ [1, 1, 2] | unique | list }}",
           "6 1 3 [1, 2]"},
          {"{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ '<&>' | e }}", "a\n  b|  a\n  b|&lt;&amp;&gt;"},
          {"{{ 3 | string + 'x' }} {{ none | string }} {{ [1] | string }}", "3x None [1]"},
      },
      extra);
}

TEST(TemplateExpr, ToJsonMatchesPythonJsonDumps) {
  const json extra = json::parse(R"({"v": {"name": "f", "n": [1, 2.5, true, null], "s": "é\"\n\u0001<>", "e": {}}})");
  // nlohmann::json sorts keys; the ordered overload below checks order preservation.
  EXPECT_EQ(render("{{ v | tojson }}", extra),
            R"({"e": {}, "n": [1, 2.5, true, null], "name": "f", "s": "é\"\n\u0001<>"})");
  EXPECT_EQ(render("{{ v.n | tojson(indent=2) }}", extra), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(render("{{ {'a': {'b': []}} | tojson(indent=4) }}"), "{\n    \"a\": {\n        \"b\": []\n    }\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"),
            R"({"b": 1, "a": 2} {"a": 2, "b": 1})");
  EXPECT_EQ(render("{{ 'x' | tojson }} {{ 1.0 | tojson }} {{ none | tojson }}"), R"("x" 1.0 null)");

  Result<ChatTemplate> t = ChatTemplate::parse("{{ tools[0] | tojson }}");
  ASSERT_TRUE(t.ok());
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function", "a": 1}])");
  Result<std::string> out = t->render(nlohmann::ordered_json::array(), tools, false, "", "");
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, R"({"type": "function", "a": 1})");
}

TEST(TemplateExpr, Tests) {
  check_cases({
      {"{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} "
       "{{ true is boolean }}",
       "False True True True True True"},
      {"{{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} "
       "{{ [] is sequence }}",
       "True False True True False True"},
      {"{{ 1 is not none }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby(3) }} {{ 1 is equalto 1 }} "
       "{{ 2 is gt(1) }} {{ 1 is integer }} {{ 1.0 is float }}",
       "True True True True True True True True"},
      {"{{ not x is defined }} {{ x is defined and x }}", "True False"},
  });
}

TEST(TemplateExpr, Statements) {
  check_cases({
      {"{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
       "{{ loop.revindex }},{% endfor %}",
       "10TrueFalse33,21FalseFalse32,32FalseTrue31,"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.last }}{% endfor %}", "2False4True"},
      {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}", "-2|1-3|2-|"},
      {"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
       "{{ x }}{% endfor %}",
       "13"},
      {"{% for x in range(3) %}{{ x }}{% endfor %}{% for x in range(1, 7, 2) %}{{ x }}{% endfor %}", "012135"},
      {"{% set a = 1 %}{% if a == 1 %}one{% elif a == 2 %}two{% else %}other{% endif %}", "one"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}cap{{ a }}{% endset %}[{{ c }}]", "12[cap1]"},
      {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"},
      {"{% set ns = namespace(x=1, y='a') %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"
       "{{ ns.y }}",
       "4a"},
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} "
       "{{ greet('B', punct='?') }}",
       "Hi A! Hi B?"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}"
       "{{ fact(5) }}",
       "120"},
      {"{# a comment #}x{% for x in [1, 2] %}{{ loop.cycle('a', 'b') }}{% endfor %}", "xab"},
      {"{% generation %}g{% endgeneration %}", "g"},
  });
}

TEST(TemplateExpr, WhitespaceControlLikeHfTransformers) {
  check_cases({
      {"a  {{- 'b' -}}  c", "abc"},
      {"a\n{%- if true -%}\n  b\n{%- endif -%}\n c", "abc"},
      // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before a block tag goes.
      {"{% if true %}\n    x\n    {% endif %}\ny", "    x\ny"},
      // Jinja2 drops one trailing newline of the template and reads "\r\n" as "\n".
      {"  {% if true %}x{% endif %}  \n", "x  "},
      {"a\r\nb\r\n\n", "a\nb\n"},
      {"a {% if true %}x{% endif %}", "a x"},
      {"{{ 'v' }}\nz", "v\nz"},
      {"{# c #}\n  {#- c2 -#}  q", "q"},
      {"  {%+ if true %}x{% endif %}", "  x"},
  });
}

TEST(TemplateExpr, StrftimeNowUsesTheClock) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  // 2024-07-26 12:00:00 UTC: the same calendar date in every time zone from UTC-11 to UTC+11.
  t->set_clock([] { return std::chrono::system_clock::from_time_t(1721995200); });
  Result<std::string> out = t->render(json::array(), nullptr, false, "", "");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "26 Jul 2024");
}

TEST(TemplateExpr, ParseErrorsNameTheConstructAndPosition) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"ab\n{% include 'x.j2' %}", "chat template: 2:4: unsupported template construct '{% include %}'"},
      {"{% extends 'base' %}", "chat template: 1:4: unsupported template construct '{% extends %}'"},
      {"{% call foo() %}{% endcall %}", "chat template: 1:4: unsupported template construct '{% call %}'"},
      {"{{ x | frobnicate }}", "chat template: 1:8: unsupported filter 'frobnicate'"},
      {"{{ x is frob }}", "chat template: 1:9: unsupported test 'frob'"},
      {"{% if x %}abc", "chat template: 1:14: missing '{% elif %}' before end of template"},
      {"{{ 1 + }}", "chat template: 1:8: expected an expression, found '}}'"},
      {"{{ 'abc }}", "chat template: 1:4: unterminated string literal"},
      {"x\n  {{ a", "chat template: 2:3: unterminated tag '{{'"},
      {"{% endfor %}", "chat template: 1:4: unknown or misplaced statement '{% endfor %}'"},
      {"{{ a $ b }}", "chat template: 1:6: unexpected character '$' in tag"},
      {"{% for x in y recursive %}{% endfor %}",
       "chat template: 1:15: unsupported template construct 'recursive' loop"},
  };
  for (const auto& [source, expected] : cases) {
    Result<ChatTemplate> t = ChatTemplate::parse(source);
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_EQ(t.error().message, expected) << source;
  }
}

TEST(TemplateExpr, RenderErrorsCarryPositionAndRaiseExceptionItsMessage) {
  EXPECT_EQ(render("{{ raise_exception('Bad roles!') }}"), "RENDER ERROR: Bad roles!");
  EXPECT_EQ(render("line1\n  {{ nope() }}"),
            "RENDER ERROR: chat template: 2:6: 'nope' is undefined (not a known "
            "function or method)");
  EXPECT_EQ(render("{% set x = 1 %}{% set x.a = 2 %}"),
            "RENDER ERROR: chat template: 1:19: cannot assign attribute 'a' on 'x': only namespace() objects accept "
            "attribute assignment");
  EXPECT_EQ(render("{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
            "RENDER ERROR: chat template: 1:4: cannot unpack 3 values into 2 names");
  EXPECT_EQ(render("{% for x in 5 %}{% endfor %}"), "RENDER ERROR: chat template: 1:4: 'int' object is not iterable");
}

TEST(TemplateExpr, GuardsStopRunawayTemplates) {
  // Unbounded recursion.
  EXPECT_NE(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("recursion deeper than"),
            std::string::npos);
  // Too much work: 10^10 iterations would never finish.
  Result<ChatTemplate> t =
      ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  t->set_limits({.max_steps = 200'000, .max_depth = 400, .max_output_bytes = 1 << 20});
  Result<std::string> out = t->render(json::array(), nullptr, false, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("exceeded 200000 steps"), std::string::npos) << out.error().message;
  // Exponential output growth.
  Result<ChatTemplate> g = ChatTemplate::parse(
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
      "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}");
  ASSERT_TRUE(g.ok());
  g->set_limits({.max_steps = 1'000'000, .max_depth = 400, .max_output_bytes = 1 << 20});
  out = g->render(json::array(), nullptr, false, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("exceeds 1048576 bytes"), std::string::npos) << out.error().message;
  EXPECT_NE(render("{{ 'x' * 9000000000000 }}").find("exceeds"), std::string::npos);
  // Deep nesting is a parse error, not a stack overflow.
  std::string deep(5000, '(');
  Result<ChatTemplate> d = ChatTemplate::parse("{{ " + deep + "1" + std::string(5000, ')') + " }}");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("nests deeper than the limit"), std::string::npos);
  std::string long_chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) long_chain += " + 1";
  Result<ChatTemplate> chain = ChatTemplate::parse(long_chain + " }}");
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.error().message.find("expression nests deeper than the limit"), std::string::npos);
  // A huge range() is refused by its size, before anything is allocated.
  EXPECT_NE(render("{{ range(1000000000000) | length }}").find("steps"), std::string::npos);
  std::string nested_ifs;
  for (int i = 0; i < 1000; ++i) nested_ifs += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::parse(nested_ifs).ok());
}

TEST(TemplateExpr, DeepInputJsonIsRejected) {
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  Result<ChatTemplate> t = ChatTemplate::parse("{{ messages }}");
  ASSERT_TRUE(t.ok());
  Result<std::string> out = t->render(deep, nullptr, false, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("deeper than 256"), std::string::npos);
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

TEST(TemplateApi, DefaultConstructedTemplateFailsCleanly) {
  const ChatTemplate empty;
  Result<std::string> out = empty.render(nlohmann::json::array(), nullptr, true, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("not initialized"), std::string::npos);
}

TEST(TemplateApi, MessagesMustBeAnArray) {
  const ChatTemplate t = ChatTemplate::fallback();
  Result<std::string> out = t.render(nlohmann::json::object(), nullptr, true, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message, "chat template: messages must be a JSON array");
}

}  // namespace
}  // namespace hearth

// Gemma 4's answers (server/api/gemma4_answer.h): thinking set apart from the content, calls in its own argument
// syntax read as compact JSON in the model's order, malformed calls kept as text, the same result however the stream
// is cut; the format detected from the real template; and the forced-call grammar, whose every output parses back.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "grammar/schema_validator.h"
#include "server/api/gemma4_answer.h"
#include "server/api/tool_calls.h"

namespace hearth::server {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "lights_on", "description": "Turn a room's lights on",
   "parameters": {"type": "object", "properties": {"room": {"type": "string", "enum": ["kitchen", "hall"]},
                  "level": {"type": "integer"}}, "required": ["room"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                  "required": ["city"]}}},
  {"type": "function", "function": {"name": "plan_trip",
   "parameters": {"type": "object", "properties": {
     "stops": {"type": "array", "items": {"type": "object", "properties": {"city": {"type": "string"},
                                                                        "nights": {"type": "integer"}},
                                          "required": ["city"]}, "maxItems": 3},
     "budget": {"type": "number"}, "flexible": {"type": "boolean"}, "note": {"type": ["string", "null"]},
     "extra": {"type": "object"}}, "required": ["stops"]}}}
])");

struct AnswerCase {
  const char* name;
  std::string text;
  std::string content;
  std::string reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const std::string Q = "<|\"|>";

std::vector<AnswerCase> answer_cases() {
  return {
      {"plain", "Hello there.", "Hello there.", "", {}},
      {"thinking_then_content",
       "<|channel>thought\nThe user greets me.<channel|>Hi!",
       "Hi!",
       "The user greets me.",
       {}},
      {"empty_thought", "<|channel>thought\n<channel|>Hi", "Hi", "", {}},
      {"channel_closed_on_its_line", "<|channel>thought<channel|>Hi", "Hi", "", {}},
      {"end_of_turn_dropped", "Done.<turn|>", "Done.", "", {}},
      {"one_call",
       "<|tool_call>call:get_weather{city:" + Q + "Paris" + Q + "}<tool_call|>",
       "",
       "",
       {{"get_weather", R"({"city":"Paris"})"}}},
      {"content_then_two_calls",
       "Sure.<|tool_call>call:lights_on{room:" + Q + "hall" + Q + ",level:2}<tool_call|><|tool_call>call:get_weather{" +
           "city:" + Q + "Oslo" + Q + "}<tool_call|><|tool_response>",
       "Sure.",
       "",
       {{"lights_on", R"({"room":"hall","level":2})"}, {"get_weather", R"({"city":"Oslo"})"}}},
      {"thinking_then_call",
       "<|channel>thought\nNeed the weather.<channel|><|tool_call>call:get_weather{city:" + Q + "Rome" + Q +
           "}<tool_call|>",
       "",
       "Need the weather.",
       {{"get_weather", R"({"city":"Rome"})"}}},
      {"nested_arguments_in_the_models_order",
       "<|tool_call>call:plan_trip{stops:[{city:" + Q + "Paris" + Q + ",nights:2},{nights:1,city:" + Q + "Rome" + Q +
           "}],budget:-2.5,flexible:true,note:null,extra:{}}<tool_call|>",
       "",
       "",
       {{"plan_trip",
         R"({"stops":[{"city":"Paris","nights":2},{"nights":1,"city":"Rome"}],"budget":-2.5,"flexible":true,)"
         R"("note":null,"extra":{}})"}}},
      {"strings_taken_as_they_are",
       "<|tool_call>call:get_weather{city:" + Q + "say \"hi\"\n\\o/ <b>" + Q + "}<tool_call|>",
       "",
       "",
       {{"get_weather", R"({"city":"say \"hi\"\n\\o/ <b>"})"}}},
      {"marker_text_inside_a_string",
       "<|tool_call>call:get_weather{city:" + Q + "x<tool_call|>y" + Q + "}<tool_call|>",
       "",
       "",
       {{"get_weather", R"({"city":"x<tool_call|>y"})"}}},
      {"spaces_and_quoted_keys",
       "<|tool_call>call:plan_trip{ stops : [ ] , " + Q + "budget" + Q + " : 3 }<tool_call|>",
       "",
       "",
       {{"plan_trip", R"({"stops":[],"budget":3})"}}},
      {"call_cut_short_that_parses",
       "<|tool_call>call:get_weather{city:" + Q + "Oslo" + Q + "}",
       "",
       "",
       {{"get_weather", R"({"city":"Oslo"})"}}},
      // Malformed or unknown: the text, markers and all, is content.
      {"unknown_tool", "<|tool_call>call:launch{}<tool_call|>", "<|tool_call>call:launch{}<tool_call|>", "", {}},
      {"unterminated_string",
       "<|tool_call>call:get_weather{city:" + Q + "Oslo}<tool_call|>",
       "<|tool_call>call:get_weather{city:" + Q + "Oslo}<tool_call|>",
       "",
       {}},
      {"bare_word_value",
       "<|tool_call>call:lights_on{room:hall}<tool_call|>",
       "<|tool_call>call:lights_on{room:hall}<tool_call|>",
       "",
       {}},
      {"leading_zero",
       "<|tool_call>call:lights_on{level:01}<tool_call|>",
       "<|tool_call>call:lights_on{level:01}<tool_call|>",
       "",
       {}},
      {"duplicate_key",
       "<|tool_call>call:lights_on{level:1,level:2}<tool_call|>",
       "<|tool_call>call:lights_on{level:1,level:2}<tool_call|>",
       "",
       {}},
      {"trailing_text_in_call",
       "<|tool_call>call:lights_on{} now<tool_call|>",
       "<|tool_call>call:lights_on{} now<tool_call|>",
       "",
       {}},
      {"no_call_prefix", "<|tool_call>lights_on{}<tool_call|>", "<|tool_call>lights_on{}<tool_call|>", "", {}},
      {"arguments_not_an_object",
       "<|tool_call>call:lights_on[]<tool_call|>",
       "<|tool_call>call:lights_on[]<tool_call|>",
       "",
       {}},
      {"cut_short_that_does_not_parse",
       "Checking.<|tool_call>call:get_weather{city:",
       "Checking.<|tool_call>call:get_weather{city:",
       "",
       {}},
      {"one_good_one_malformed",
       "<|tool_call>call:lights_on{room:" + Q + "hall" + Q + "}<tool_call|>then<|tool_call>call:nope{}<tool_call|>",
       "then<|tool_call>call:nope{}<tool_call|>",
       "",
       {{"lights_on", R"({"room":"hall"})"}}},
      {"partial_marker_at_the_end", "a <|tool", "a <|tool", "", {}},
      {"thought_cut_short", "<|channel>thought\nHmm", "", "Hmm", {}},
  };
}

ChannelAnswer parse_in_pieces(std::string_view text, const std::vector<size_t>& cuts) {
  Gemma4Parser parser(kTools);
  ChannelAnswer out;
  size_t at = 0;
  auto take = [&](const ChannelDelta& d) {
    out.content += d.content;
    out.reasoning += d.reasoning;
  };
  for (size_t cut : cuts) {
    take(parser.push(text.substr(at, cut - at)));
    at = cut;
  }
  take(parser.push(text.substr(at)));
  take(parser.finish());
  out.calls = parser.calls();
  return out;
}

void expect_answer(const ChannelAnswer& got, const AnswerCase& c, const std::string& how) {
  EXPECT_EQ(got.content, c.content) << c.name << how;
  EXPECT_EQ(got.reasoning, c.reasoning) << c.name << how;
  ASSERT_EQ(got.calls.size(), c.calls.size()) << c.name << how;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, c.calls[i].first) << c.name << how;
    EXPECT_EQ(got.calls[i].arguments, c.calls[i].second) << c.name << how;
  }
}

TEST(Gemma4Answer, ContentThinkingAndCalls) {
  for (const AnswerCase& c : answer_cases()) {
    Gemma4Parser parser(kTools);
    expect_answer(parse_channels(parser, c.text), c, "");
  }
}

// Cut in two at every byte, and pushed byte by byte: the same content, reasoning and calls.
TEST(Gemma4Answer, TheSameResultAtEverySplit) {
  for (const AnswerCase& c : answer_cases()) {
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      expect_answer(parse_in_pieces(c.text, {cut}), c, " cut at " + std::to_string(cut));
    }
    std::vector<size_t> every;
    for (size_t i = 1; i < c.text.size(); ++i) every.push_back(i);
    expect_answer(parse_in_pieces(c.text, every), c, " byte by byte");
  }
}

// Content streams at once, less a tail that may be a marker; a call is held until it closes.
TEST(Gemma4Answer, StreamsWhatIsCertain) {
  Gemma4Parser parser(kTools);
  EXPECT_EQ(parser.push("<|channel>thought\nHm").reasoning, "Hm");
  EXPECT_EQ(parser.push("m<chan").reasoning, "m");
  ChannelDelta d = parser.push("nel|>Sure. <|tool_");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Sure. ");
  EXPECT_TRUE(parser.push("call>call:lights_on{room:<|\"|>hall<|\"|>}").empty());
  EXPECT_TRUE(parser.calls().empty());
  EXPECT_TRUE(parser.push("<tool_call|>").empty());
  ASSERT_EQ(parser.calls().size(), 1u);
  EXPECT_EQ(parser.calls()[0].arguments, R"({"room":"hall"})");
}

// Without tools (none sent, or tool_choice none) every call stays text.
TEST(Gemma4Answer, NoToolsNoCalls) {
  Gemma4Parser parser(json::array());
  const ChannelAnswer a = parse_channels(parser, "<|tool_call>call:lights_on{}<tool_call|>");
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "<|tool_call>call:lights_on{}<tool_call|>");
}

TEST(Gemma4Answer, ParseToolCallsOfAWholeAnswer) {
  auto parsed = parse_tool_calls(ToolCallFormat::kGemma4,
                                 "<|channel>thought\nok<channel|> Calling. <|tool_call>call:lights_on{room:<|\"|>hall"
                                 "<|\"|>}<tool_call|>",
                                 kTools);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->content, "Calling.");
  ASSERT_EQ(parsed->calls.size(), 1u);
  EXPECT_EQ(parsed->calls[0].name, "lights_on");
  EXPECT_EQ(parsed->calls[0].arguments, R"({"room":"hall"})");
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kGemma4, "Just text.", kTools));
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kGemma4, "<|tool_call>call:lights_on{x}<tool_call|>", kTools));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Gemma4Answer, DetectedFromTheRealTemplate) {
  const std::string gemma4 = read_file(std::string(HEARTH_TEMPLATE_DIR) + "/gemma4.jinja");
  EXPECT_EQ(detect_tool_call_format(gemma4), ToolCallFormat::kGemma4);
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kGemma4), "gemma4");
  const std::string gemma2 = read_file(std::string(HEARTH_SHARED_DIR) + "/templates/google-gemma-2-2b-it.jinja");
  EXPECT_EQ(detect_tool_call_format(gemma2), ToolCallFormat::kJson);
}

TEST(Gemma4Answer, ToolCallStreamHoldsFromTheCallMarker) {
  ToolCallStream stream(ToolCallFormat::kGemma4, false);
  EXPECT_EQ(stream.push("Let me look. <|tool"), "Let me look. ");
  EXPECT_EQ(stream.push("_call>call:"), "");
  EXPECT_EQ(stream.held(), "<|tool_call>call:");
}

bool accepts(const Grammar& g, std::string_view text, bool whole) {
  GrammarState s = g.start();
  if (!g.advance(s, text)) return false;
  return !whole || Grammar::is_terminal(s);
}

TEST(Gemma4ForcedCall, GrammarSpeaksTheCallSyntax) {
  auto g = forced_tool_call_grammar(ToolCallFormat::kGemma4, kTools, "");
  ASSERT_TRUE(g) << g.error().message;
  const std::string call = "<|tool_call>call:lights_on{room:" + Q + "hall" + Q + ",level:2}<tool_call|>";
  EXPECT_TRUE(accepts(*g, call, true));
  auto parsed = parse_tool_calls(ToolCallFormat::kGemma4, call, kTools);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->calls[0].arguments, R"({"room":"hall","level":2})");
  EXPECT_TRUE(accepts(*g,
                      "<|tool_call>call:plan_trip{stops:[{city:" + Q + "a<b" + Q + "}],extra:{" + Q + "k" + Q +
                          ":[1,true]}}<tool_call|>",
                      true));
  EXPECT_TRUE(accepts(*g, "<|tool_call>call:get_weather{city:" + Q + "line\nnext" + Q + "}<tool_call|>", true));
  // What the schema or the syntax forbids.
  EXPECT_FALSE(accepts(*g, R"({"name": "lights_on")", false));                                   // JSON
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:lights_on{\"room\"", false));                       // quoted JSON key
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:lights_on{level:2}", false));                       // room is required
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:lights_on{room:" + Q + "attic", false));            // not in the enum
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:lights_on{color:", false));                         // no such key
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:get_weather{city:" + Q + "a<|x", false));           // "<|" ends a string
  EXPECT_FALSE(accepts(*g, "<|tool_call>call:get_weather{city:" + Q + "0123456789abc", false));  // maxLength 12
  EXPECT_FALSE(
      accepts(*g, "<|tool_call>call:plan_trip{stops:[{city:" + Q + Q + "},{city:" + Q + Q + "},{city:" + Q + Q + "},",
              false));  // maxItems 3
  auto only = forced_tool_call_grammar(ToolCallFormat::kGemma4, kTools, "get_weather");
  ASSERT_TRUE(only);
  EXPECT_FALSE(accepts(*only, "<|tool_call>call:lights_on", false));
  json bad = kTools;
  bad[0]["function"]["parameters"]["properties"]["a:b"] = json{{"type", "string"}};
  auto refused = forced_tool_call_grammar(ToolCallFormat::kGemma4, bad, "");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("\"a:b\" cannot be written in Gemma 4's call syntax"), std::string::npos)
      << refused.error().message;
}

// Random walks through the grammar (each byte drawn from those it accepts), finished by quick_completion: every
// output is one call that the parser reads back, naming a tool, with arguments that validate against its schema.
void expect_every_output_parses_back(const json& tools, int walks) {
  auto g = forced_tool_call_grammar(ToolCallFormat::kGemma4, tools, "");
  ASSERT_TRUE(g) << g.error().message;
  std::mt19937 rng(7);
  int calls = 0;
  for (int walk = 0; walk < walks; ++walk) {
    GrammarState s = g->start();
    std::string text;
    for (int n = 0; n < 160 && !Grammar::is_terminal(s); ++n) {
      std::vector<uint8_t> ok;
      for (int b = 0; b < 256; ++b) {
        GrammarState t;
        t.copy_from(s);
        if (g->advance(t, static_cast<uint8_t>(b))) ok.push_back(static_cast<uint8_t>(b));
      }
      ASSERT_FALSE(ok.empty()) << text;
      // Printable ASCII most of the time, so walks reach keys and values rather than long UTF-8 runs.
      std::vector<uint8_t> ascii;
      for (uint8_t b : ok) {
        if (b >= 0x20 && b < 0x7f) ascii.push_back(b);
      }
      const std::vector<uint8_t>& from = !ascii.empty() && rng() % 8 != 0 ? ascii : ok;
      const uint8_t b = from[rng() % from.size()];
      ASSERT_TRUE(g->advance(s, b));
      text.push_back(static_cast<char>(b));
    }
    auto rest = g->quick_completion(s, 4096);
    ASSERT_TRUE(rest) << text;
    text += *rest;
    auto parsed = parse_tool_calls(ToolCallFormat::kGemma4, text, tools);
    ASSERT_TRUE(parsed) << text;
    ASSERT_EQ(parsed->calls.size(), 1u) << text;
    const json arguments = json::parse(parsed->calls[0].arguments);
    const auto tool = std::find_if(tools.begin(), tools.end(),
                                   [&](const json& t) { return t["function"]["name"] == parsed->calls[0].name; });
    ASSERT_NE(tool, tools.end()) << text;
    EXPECT_TRUE(test::validates_schema(arguments, (*tool)["function"]["parameters"])) << text;
    ++calls;
  }
  EXPECT_EQ(calls, walks);
}

TEST(Gemma4ForcedCall, EveryGrammarOutputParsesBack) {
  expect_every_output_parses_back(kTools, 150);
}

// The JSON-schema subset in Gemma 4's syntax: anyOf alternatives that begin alike (two objects, two strings) are
// followed as separate readings, each with its own keys and lengths; $ref, integer bounds, multipleOf, oneOf of
// consts.
const json kSchemaTools = json::parse(R"([
  {"type": "function", "function": {"name": "set_alarm",
   "parameters": {"type": "object",
     "$defs": {"clock": {"type": "object", "properties": {"h": {"type": "integer", "minimum": 0, "maximum": 23},
                                                         "m": {"type": "integer", "minimum": 0, "maximum": 59}},
                         "required": ["h", "m"], "additionalProperties": false}},
     "properties": {
       "at": {"anyOf": [{"$ref": "#/$defs/clock"},
                        {"type": "object", "properties": {"in": {"type": "integer", "minimum": 1, "maximum": 600}},
                         "required": ["in"], "additionalProperties": false}]},
       "label": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "string", "minLength": 6, "maxLength": 8}]},
       "every": {"type": ["integer", "null"], "minimum": 0, "maximum": 1000, "multipleOf": 5},
       "mode": {"oneOf": [{"const": "once"}, {"enum": ["daily", "weekly"]}]}},
     "required": ["at", "mode"], "additionalProperties": false}}}
])");

TEST(Gemma4ForcedCall, SchemaKeywordsApplyPerReading) {
  auto g = forced_tool_call_grammar(ToolCallFormat::kGemma4, kSchemaTools, "");
  ASSERT_TRUE(g) << g.error().message;
  const std::string call = "<|tool_call>call:set_alarm{";
  EXPECT_TRUE(accepts(*g, call + "at:{h:7,m:30},mode:" + Q + "daily" + Q + "}<tool_call|>", true));
  EXPECT_TRUE(accepts(
      *g, call + "at:{in:45},label:" + Q + "abcdefg" + Q + ",every:15,mode:" + Q + "once" + Q + "}<tool_call|>", true));
  EXPECT_TRUE(accepts(
      *g, call + "at:{in:600},label:" + Q + "ab" + Q + ",every:null,mode:" + Q + "weekly" + Q + "}<tool_call|>", true));
  auto parsed = parse_tool_calls(
      ToolCallFormat::kGemma4,
      call + "at:{h:7,m:30},label:" + Q + "ab" + Q + ",mode:" + Q + "daily" + Q + "}<tool_call|>", kSchemaTools);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->calls[0].arguments, R"({"at":{"h":7,"m":30},"label":"ab","mode":"daily"})");
  EXPECT_FALSE(accepts(*g, call + "at:{h:24", false));                            // maximum 23
  EXPECT_FALSE(accepts(*g, call + "at:{h:1,in:", false));                         // one reading's key, then the other's
  EXPECT_FALSE(accepts(*g, call + "at:{in:601", false));                          // maximum 600
  EXPECT_FALSE(accepts(*g, call + "at:{in:5},label:" + Q + "abcde<|", false));    // 5: above 4, below 6
  EXPECT_FALSE(accepts(*g, call + "at:{in:5},label:" + Q + "abcdefghi", false));  // maxLength 8
  EXPECT_FALSE(accepts(*g, call + "at:{in:5},every:7,", false));                  // multipleOf 5
  EXPECT_FALSE(accepts(*g, call + "at:{in:5},mode:" + Q + "monthly", false));     // neither const nor enum
  EXPECT_FALSE(accepts(*g, call + "at:{in:5},mode:\"once\"", false));             // a JSON string
  expect_every_output_parses_back(kSchemaTools, 100);
}

// pattern and format in Gemma 4's syntax: their automata spell its <|"|> quotes, so every walk's string matches
// (checked by std::regex and the format checks, independent of the grammar) and parses back.
TEST(Gemma4ForcedCall, PatternAndFormatSpellItsQuotes) {
  json tools = kSchemaTools;
  json& props = tools[0]["function"]["parameters"]["properties"];
  props["label"] = json{{"type", "string"}, {"pattern", "^[a-z]{2,5}-\\d{2}$"}};
  props["day"] = json{{"type", "string"}, {"format", "date"}};
  props["email"] = json{{"type", "string"}, {"format", "email"}, {"maxLength", 24}};
  tools[0]["function"]["parameters"]["required"] = json::array({"at", "mode", "label", "day", "email"});
  auto g = forced_tool_call_grammar(ToolCallFormat::kGemma4, tools, "");
  ASSERT_TRUE(g) << g.error().message;
  const std::string call = "<|tool_call>call:set_alarm{at:{in:5},mode:" + Q + "once" + Q + ",label:" + Q;
  EXPECT_TRUE(accepts(
      *g, call + "ab-12" + Q + ",day:" + Q + "2026-12-07" + Q + ",email:" + Q + "a@b.io" + Q + "}<tool_call|>", true));
  EXPECT_FALSE(accepts(*g, call + "ab-1" + Q, false));                                // two digits
  EXPECT_FALSE(accepts(*g, call + "\"ab-12\"", false));                               // a JSON string
  EXPECT_FALSE(accepts(*g, call + "ab-12" + Q + ",day:" + Q + "2026-02-30", false));  // no such day
  expect_every_output_parses_back(tools, 60);
}

}  // namespace
}  // namespace hearth::server

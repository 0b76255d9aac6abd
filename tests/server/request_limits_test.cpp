// Hardening: JSON nesting depth enforced while parsing, typed /tokenize fields, bounded /v1/kv/plan
// counts, the API key and listen address checks of `hearth serve`.

#include <gtest/gtest.h>

#include <string>

#include "server/api/tokenize_request.h"
#include "server/cache/kv_plan_json.h"
#include "server/http/json_body.h"
#include "server/http/serve_access.h"
#include "server/openai/openai_json.h"

namespace hearth::server {
namespace {

using nlohmann::json;

// `levels` arrays nested inside one another: [[[...]]].
std::string nested_arrays(size_t levels) {
  return std::string(levels, '[') + std::string(levels, ']');
}
// `levels` objects nested inside one another: {"a":{"a":...{}}}.
std::string nested_objects(size_t levels) {
  std::string out;
  out.reserve(levels * 6);
  for (size_t i = 1; i < levels; ++i) out += R"({"a":)";
  out += "{}";
  out.append(levels - 1, '}');
  return out;
}

constexpr size_t kDeep = 100'000;

void expect_too_deep(const ApiResult<CompletionRequest>& result) {
  ASSERT_FALSE(result.ok());
  const ApiError& e = result.error();
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "json_too_deep");
  EXPECT_NE(e.message.find("nests deeper than 256"), std::string::npos) << e.message;
}

TEST(JsonBody, DepthAtTheLimitParses) {
  auto ok = parse_json_body(nested_arrays(kMaxJsonBodyDepth));
  ASSERT_TRUE(ok.ok());
  auto too_deep = parse_json_body(nested_arrays(kMaxJsonBodyDepth + 1));
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().code, "json_too_deep");
}

TEST(JsonBody, StringsAndScalarsDoNotCountAsNesting) {
  const std::string brackets_in_string = R"({"a": ")" + nested_arrays(1000) + R"("})";
  EXPECT_TRUE(parse_json_body(brackets_in_string).ok());
  EXPECT_TRUE(parse_json_body("[1, 2, [3, {\"x\": [4]}]]").ok());
}

TEST(JsonBody, MalformedIsInvalidJson) {
  for (const char* body : {"", "{", "[1,]", "{\"a\" 1}", "nul", "[[[[", "\"\\x\""}) {
    auto r = parse_json_body(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code, "invalid_json") << body;
  }
}

TEST(JsonBody, HundredThousandLevelsAreRefusedWithoutBuildingTheTree) {
  auto arrays = parse_json_body(nested_arrays(kDeep));
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.error().code, "json_too_deep");
  auto objects = parse_json_body(nested_objects(kDeep));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().code, "json_too_deep");
}

// The bodies that crashed the server (stack overflow in a recursive copy of the message or of `tools`).
TEST(JsonBody, DeepChatMessageIsA400) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "hi", "extra": )" + nested_objects(kDeep) + "}]}";
  expect_too_deep(parse_completion_request(body, Endpoint::kChat));
}

TEST(JsonBody, DeepToolsIsA400) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": )" + nested_arrays(kDeep) + "}";
  expect_too_deep(parse_completion_request(body, Endpoint::kChat));
}

TEST(JsonBody, DeepCompletionPromptIsA400) {
  expect_too_deep(parse_completion_request(R"({"prompt": )" + nested_arrays(kDeep) + "}", Endpoint::kCompletion));
}

TEST(Tokenize, DefaultsAndFlags) {
  auto r = parse_tokenize_request(R"({"content": "hi"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "hi");
  EXPECT_TRUE(r->add_special);
  EXPECT_FALSE(r->parse_special);
  r = parse_tokenize_request(R"({"content": "", "add_special": false, "parse_special": true})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->add_special);
  EXPECT_TRUE(r->parse_special);
  r = parse_tokenize_request(R"({"content": "x", "add_special": null})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->add_special);
}

TEST(Tokenize, WrongTypesAreA400NamingTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c :
       {Case{R"({"content": "x", "add_special": "yes"})", "add_special"},
        Case{R"({"content": "x", "parse_special": 1})", "parse_special"}, Case{R"({"content": 5})", "content"},
        Case{R"({"add_special": true})", "content"}, Case{R"([1])", ""}, Case{"{", ""}}) {
    auto r = parse_tokenize_request(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    const ApiError& e = r.error();
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    if (*c.param) {
      EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
    }
  }
  auto deep = parse_tokenize_request(R"({"content": "x", "a": )" + nested_arrays(kDeep) + "}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().code, "json_too_deep");
}

TEST(KvPlanQuery, CountsAreBoundedAndNeverClamped) {
  auto ok = parse_plan_count("ctx", "4096", kMaxPlanContext);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 4096);
  EXPECT_EQ(parse_plan_count("users", "1048576", kMaxPlanUsers).value(), kMaxPlanUsers);
  struct Case {
    const char* text;
    const char* message_part;
  };
  for (const Case& c : {Case{"2147483647", "'ctx' is 2147483647, outside the allowed range [1, 16777216]"},
                        Case{"99999999999999999999", "'ctx' is 99999999999999999999, outside"},
                        Case{"16777217", "outside the allowed range"}, Case{"0", "outside the allowed range"},
                        Case{"-5", "positive integer"}, Case{"", "positive integer"}, Case{"12x", "positive integer"},
                        Case{"+5", "positive integer"}, Case{" 5", "positive integer"}}) {
    auto r = parse_plan_count("ctx", c.text, kMaxPlanContext);
    ASSERT_FALSE(r.ok()) << c.text;
    const ApiError& e = r.error();
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "ctx");
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
  }
}

TEST(ServeAccess, AnEmptyKeyIsRefusedNotSilentlyOff) {
  EXPECT_EQ(*resolve_api_key(std::nullopt, nullptr), "");  // neither given: no authentication
  EXPECT_EQ(*resolve_api_key(std::string("sk-1"), nullptr), "sk-1");
  EXPECT_EQ(*resolve_api_key(std::nullopt, "sk-env"), "sk-env");
  EXPECT_EQ(*resolve_api_key(std::string("sk-flag"), "sk-env"), "sk-flag");  // the flag wins
  for (const char* empty : {"", " ", "\t"}) {
    auto flag = resolve_api_key(std::string(empty), "sk-env");
    ASSERT_FALSE(flag);
    EXPECT_NE(flag.error().message.find("--api-key is empty"), std::string::npos) << flag.error().message;
    auto env = resolve_api_key(std::nullopt, empty);
    ASSERT_FALSE(env);
    EXPECT_NE(env.error().message.find("HEARTH_API_KEY is set but empty"), std::string::npos);
  }
}

TEST(ServeAccess, LoopbackHosts) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
    EXPECT_EQ(exposure_warning(host, false), "") << host;
  }
  for (const char* host : {"0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.com", "", "128.0.0.1"}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
    const std::string warning = exposure_warning(host, false);
    EXPECT_NE(warning.find("no API key"), std::string::npos) << host;
    EXPECT_EQ(exposure_warning(host, true), "") << host;
  }
}

}  // namespace
}  // namespace hearth::server

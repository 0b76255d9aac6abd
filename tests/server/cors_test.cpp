// CORS (server/http/cors.h) and the /v1 aliases (server/api/route_table.h), table-driven: which --allow-origin values
// parse, which Origin gets which Access-Control-Allow-Origin, the preflight's answer, and which paths are aliases.
// The same behaviour through real fetch() requests: e2e/paths_cors.test.mjs.

#include <gtest/gtest.h>

#include "server/api/route_table.h"
#include "server/http/cors.h"

namespace hearth::server {
namespace {

std::string header_of(const HttpResponse& res, std::string_view name) {
  for (const auto& [n, v] : res.headers) {
    if (n == name) return v;
  }
  return "(none)";
}

TEST(Cors, AllowedOriginValuesParseOrNameTheProblem) {
  struct Case {
    std::string value;
    std::string parsed;  // empty: an error containing `why`
    std::string why;
  };
  const Case cases[] = {
      {"*", "*", ""},
      {"http://localhost:5173", "http://localhost:5173", ""},
      {"https://app.example/", "https://app.example", ""},
      {"http://[::1]:8080", "http://[::1]:8080", ""},
      {"localhost:5173", "", "no scheme"},
      {"ftp://x.example", "", "http or https"},
      {"http://", "", "no host"},
      {"http://x.example/app", "", "no path"},
      {"http://user@x.example", "", "no path, query or user"},
      {"", "", "no scheme"},
  };
  for (const Case& c : cases) {
    auto parsed = parse_allowed_origin(c.value);
    if (c.parsed.empty()) {
      ASSERT_FALSE(parsed.ok()) << c.value;
      EXPECT_NE(parsed.error().message.find(c.why), std::string::npos) << parsed.error().message;
      EXPECT_NE(parsed.error().message.find("--allow-origin"), std::string::npos) << parsed.error().message;
    } else {
      ASSERT_TRUE(parsed.ok()) << c.value << ": " << parsed.error().message;
      EXPECT_EQ(*parsed, c.parsed);
    }
  }
}

TEST(Cors, AllowOriginMatchesListedOriginsExactlyOrStar) {
  const CorsPolicy listed{{"http://a.example", "https://b.example:8443"}};
  EXPECT_EQ(listed.allow_origin("http://a.example"), "http://a.example");
  EXPECT_EQ(listed.allow_origin("https://b.example:8443"), "https://b.example:8443");
  EXPECT_EQ(listed.allow_origin("https://a.example"), std::nullopt);
  EXPECT_EQ(listed.allow_origin("http://a.example.evil"), std::nullopt);
  EXPECT_EQ(listed.allow_origin(std::nullopt), std::nullopt);
  const CorsPolicy any{{"*"}};
  EXPECT_EQ(any.allow_origin("null"), "*");
  EXPECT_EQ(any.allow_origin(std::nullopt), std::nullopt) << "no Origin: not a browser's cross-origin request";
  const CorsPolicy off;
  EXPECT_EQ(off.allow_origin("http://a.example"), std::nullopt);
}

TEST(Cors, PreflightIsA204OnlyForAnAllowedOriginsOptionsWithARequestMethod) {
  const CorsPolicy policy{{"http://a.example"}};
  HttpRequest req;
  req.method = "OPTIONS";
  req.path = "/v1/chat/completions";
  req.headers = {{"Origin", "http://a.example"},
                 {"Access-Control-Request-Method", "POST"},
                 {"Access-Control-Request-Headers", "authorization, content-type"}};
  const auto res = policy.preflight(req);
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->body, "");
  EXPECT_EQ(header_of(*res, "Access-Control-Allow-Origin"), "http://a.example");
  EXPECT_EQ(header_of(*res, "Access-Control-Allow-Methods"), "GET, POST, DELETE, OPTIONS");
  EXPECT_EQ(header_of(*res, "Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_EQ(header_of(*res, "Access-Control-Max-Age"), "86400");
  EXPECT_EQ(header_of(*res, "Vary"), "Origin");
  // A header list with a character no header name has is not echoed.
  HttpRequest odd = req;
  odd.headers[2].second = "x-a\r\nInjected: 1";
  EXPECT_EQ(header_of(*policy.preflight(odd), "Access-Control-Allow-Headers"),
            "Authorization, Content-Type, x-api-key");
  // Not preflights, or not allowed: the routes answer.
  HttpRequest other_origin = req;
  other_origin.headers[0].second = "http://b.example";
  EXPECT_FALSE(policy.preflight(other_origin).has_value());
  HttpRequest no_method = req;
  no_method.headers.erase(no_method.headers.begin() + 1);
  EXPECT_FALSE(no_method.headers.empty());
  EXPECT_FALSE(policy.preflight(no_method).has_value());
  HttpRequest post = req;
  post.method = "POST";
  EXPECT_FALSE(policy.preflight(post).has_value());
  EXPECT_FALSE(CorsPolicy{}.preflight(req).has_value());
}

TEST(V1Aliases, OnlyTheListedRoutesAreAliased) {
  const std::pair<std::string, std::optional<std::string>> cases[] = {
      {"/chat/completions", "/v1/chat/completions"},
      {"/completions", "/v1/completions"},
      {"/models", "/v1/models"},
      {"/models/stories260K", "/v1/models/stories260K"},
      {"/responses", "/v1/responses"},
      {"/responses/resp_1", "/v1/responses/resp_1"},
      {"/messages", "/v1/messages"},
      {"/messages/count_tokens", "/v1/messages/count_tokens"},
      {"/models/", std::nullopt},
      {"/embeddings", "/v1/embeddings"},
      {"/embeddings/", std::nullopt},
      {"/v1/chat/completions", std::nullopt},
      {"/chat/completions/", std::nullopt},
      {"/messages/batches", std::nullopt},
      {"/health", std::nullopt},
      {"/api/chat", std::nullopt},
      {"/", std::nullopt},
  };
  for (const auto& [path, expected] : cases) EXPECT_EQ(v1_route_for_alias(path), expected) << path;
}

}  // namespace
}  // namespace hearth::server

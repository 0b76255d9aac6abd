// POST /tokenize (llama.cpp's shape): the token ids of a text, as the served model's tokenizer encodes it.

#include "server/api/routes.h"
#include "server/api/tokenize_request.h"

namespace hearth::server {
namespace {

using nlohmann::json;

HttpResponse handle_tokenize(ServerContext& context, const HttpRequest& req) {
  auto parsed = parse_tokenize_request(req.body);
  if (!parsed) return context.error_response(parsed.error());
  const TokenizeRequest& request = *parsed;
  json tokens = json::array();
  for (TokenId t : context.tokenizer().encode(request.content, request.add_special, request.parse_special)) {
    tokens.push_back(t.value);
  }
  return ServerContext::json_response(json{{"tokens", std::move(tokens)}});
}

}  // namespace

void add_tokenize_routes(Routes& routes, ServerContext& context) {
  routes.add("POST", "/tokenize", [&context](const HttpRequest& req) { return handle_tokenize(context, req); });
}

}  // namespace hearth::server

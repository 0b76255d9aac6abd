// POST /v1/responses: OpenAI's Responses API over the same engine as the chat route. The body becomes a chat
// (responses_request.h), rendered by the model's template, or continues a stored response (previous_response_id:
// its exact ids, responses_prompt.h). One engine request; the answer is a response object or the typed SSE events
// (responses_json.h). GET /v1/responses/{id} returns a stored response, DELETE removes it; both take the
// cache_salt of the request that made it as ?cache_salt= (a salt is a tenant: another's responses are not found).

#include <fmt/format.h>

#include <chrono>

#include "server/http/tenant_keys.h"
#include "server/responses/responses_generation.h"
#include "server/responses/routes.h"

namespace hearth::server {
namespace {

using nlohmann::json;

constexpr std::string_view kResponsesPath = "/v1/responses";

ApiError not_found(std::string_view id) {
  return ApiError{404,
                  fmt::format("no stored response has the id '{}' (it may have expired or been deleted, been made "
                              "with store: false, or under another cache_salt)",
                              id),
                  "invalid_request_error",
                  {},
                  "not_found"};
}

// A previous_response_id that names no stored response is the request's fault: a 400 naming the field.
ApiError previous_not_found(std::string_view id) {
  ApiError error = not_found(id);
  error.status = 400;
  error.param = "previous_response_id";
  error.code = "previous_response_not_found";
  return error;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What only this route refuses: reasoning for a model that does not reason, store with the store off.
std::optional<ApiError> check_route(const ServerContext& context, const ResponseStore& store,
                                    const ResponsesRequest& request) {
  if (request.reasoning_effort && !context.chat().harmony()) {
    return invalid_request("'reasoning.effort' is for reasoning models; this model's template does not reason",
                           "reasoning.effort", "unsupported_parameter");
  }
  if (request.store && store.limits().max_entries == 0) {
    return invalid_request("this server keeps no responses (--responses-store 0): send \"store\": false", "store",
                           "unsupported_parameter");
  }
  return std::nullopt;
}

HttpResponse handle_create(ServerContext& context, const std::shared_ptr<ResponseStore>& store,
                           const HttpRequest& req) {
  if (context.draining()) {
    return context.error_response(ApiError{503, "the server is shutting down", "server_error", {}, {}});
  }
  auto parsed = parse_responses_request(req.body);
  if (!parsed) return context.error_response(parsed.error());
  ResponsesRequest& request = *parsed;
  request.chat.cache_salt = scoped_cache_salt(req, request.chat.cache_salt);
  if (auto error = context.check_model(request.chat)) return context.error_response(*error);
  if (auto error = check_route(context, *store, request)) return context.error_response(*error);
  if (auto error = context.force_tool_call(request.chat)) return context.error_response(*error);
  std::shared_ptr<const StoredResponse> previous;
  if (!request.previous_response_id.empty()) {
    previous = store->get(request.chat.cache_salt, request.previous_response_id);
    if (!previous) return context.error_response(previous_not_found(request.previous_response_id));
  }
  auto prompt = build_responses_prompt(context, request, previous.get());
  if (!prompt) return context.error_response(prompt.error());
  RequestSpec spec =
      context.build_spec(request.chat, std::move(prompt->built.tokens), std::move(prompt->built.checkpoint_hints));
  if (spec.use_cache && !spec.prompt.empty()) context.observe_prompt(spec.prompt, spec);
  auto handle = context.loop().submit(std::move(spec));
  if (!handle) return context.error_response(api_error(handle.error(), Endpoint::kChat));
  ResponseHead head{new_item_id("resp_"),
                    unix_seconds(),
                    context.loop().info().model_id,
                    request.instructions,
                    request.previous_response_id,
                    request.store,
                    request.echo};
  if (!request.chat.use_cache || context.answers().max_entries() == 0) prompt->built.text.clear();
  HttpResponse res;
  res.source = std::make_shared<ResponsesGeneration>(context, store, std::move(request), std::move(head),
                                                     std::move(*prompt), std::move(*handle));
  return res;
}

// The id in /v1/responses/{id}; empty for a deeper path.
std::string_view response_id(const HttpRequest& req) {
  std::string_view id = std::string_view(req.path).substr(kResponsesPath.size() + 1);
  return id.find('/') == std::string_view::npos ? id : std::string_view();
}

// GET /v1/responses/{id}/input_items and POST .../cancel (background responses) are not implemented.
ApiError unknown_path(const HttpRequest& req) {
  return ApiError{404, "unknown endpoint: " + req.method + " " + req.path, "not_found_error", {}, "unknown_url"};
}

HttpResponse handle_get(ServerContext& context, ResponseStore& store, const HttpRequest& req) {
  const std::string_view id = response_id(req);
  if (id.empty()) return context.error_response(unknown_path(req));
  const std::string salt = scoped_cache_salt(req, req.param("cache_salt").value_or(""));
  auto stored = store.get(salt, id);
  if (!stored) return context.error_response(not_found(id));
  return ServerContext::json_response(stored->response);
}

HttpResponse handle_delete(ServerContext& context, ResponseStore& store, const HttpRequest& req) {
  const std::string_view id = response_id(req);
  if (id.empty()) return context.error_response(unknown_path(req));
  const std::string salt = scoped_cache_salt(req, req.param("cache_salt").value_or(""));
  if (!store.remove(salt, id)) return context.error_response(not_found(id));
  return ServerContext::json_response(json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
}

}  // namespace

void add_responses_routes(Routes& routes, ServerContext& context, ResponseStore::Limits limits) {
  auto store = std::make_shared<ResponseStore>(limits);
  routes.add("POST", std::string(kResponsesPath),
             [&context, store](const HttpRequest& req) { return handle_create(context, store, req); });
  const std::string prefix = std::string(kResponsesPath) + "/";
  routes.add("GET", prefix, [&context, store](const HttpRequest& req) { return handle_get(context, *store, req); });
  routes.add("DELETE", prefix,
             [&context, store](const HttpRequest& req) { return handle_delete(context, *store, req); });
}

}  // namespace hearth::server

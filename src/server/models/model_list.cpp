// GET /v1/models and /v1/models/{id}: an alias answers as itself; with lenient names any other id answers as the
// served model (what a completion naming it would run), with strict names it is a 404.

#include "server/models/model_names.h"
#include "server/models/routes.h"

namespace hearth::server {
namespace {

HttpResponse handle_models(ServerContext& context, const HttpRequest& req) {
  const EngineInfo& info = context.loop().info();
  const ModelNames& names = context.model_names();
  constexpr std::string_view kPrefix = "/v1/models/";
  if (!req.path.starts_with(kPrefix)) {
    return ServerContext::json_response(model_list_json(names, info.n_ctx, info.block_size));
  }
  const std::string id = req.path.substr(kPrefix.size());
  if (auto error = names.check(id)) return context.error_response(*error);
  const std::string& answered = names.is_listed(id) ? id : info.model_id;
  return ServerContext::json_response(model_entry_json(answered, names, info.n_ctx, info.block_size));
}

}  // namespace

void add_model_list_routes(Routes& routes, ServerContext& context) {
  routes.add("GET", "/v1/models", [&context](const HttpRequest& req) { return handle_models(context, req); });
  routes.add("GET", "/v1/models/", [&context](const HttpRequest& req) { return handle_models(context, req); });
}

}  // namespace hearth::server

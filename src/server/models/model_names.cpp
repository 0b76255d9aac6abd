#include "server/models/model_names.h"

#include <algorithm>

#include <fmt/format.h>

namespace hearth::server {

bool ModelNames::is_listed(const std::string& id) const {
  return id == served || std::find(aliases.begin(), aliases.end(), id) != aliases.end();
}

bool ModelNames::accepts(const std::string& requested) const {
  return requested.empty() || !strict || is_listed(requested);
}

std::optional<ApiError> ModelNames::check(const std::string& requested) const {
  if (accepts(requested)) return std::nullopt;
  std::string known = fmt::format("'{}'", served);
  for (const std::string& a : aliases) known += fmt::format(", '{}'", a);
  return ApiError{
      404, fmt::format("the model '{}' does not exist; this server serves {} (strict model names)", requested, known),
      "invalid_request_error", "model", "model_not_found"};
}

nlohmann::json model_entry_json(const std::string& id, const ModelNames& names, int32_t n_ctx, int32_t block_size) {
  nlohmann::json meta = {{"n_ctx", n_ctx}, {"block_size", block_size}};
  if (id != names.served) meta["alias_of"] = names.served;
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "hearth"}, {"meta", std::move(meta)}};
}

nlohmann::json model_list_json(const ModelNames& names, int32_t n_ctx, int32_t block_size) {
  nlohmann::json data = nlohmann::json::array({model_entry_json(names.served, names, n_ctx, block_size)});
  for (const std::string& a : names.aliases) {
    if (a != names.served) data.push_back(model_entry_json(a, names, n_ctx, block_size));
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace hearth::server

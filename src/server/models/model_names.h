#pragma once
// Which `model` names a request may use. Apps send fixed names (gpt-4o-mini, LangChain's gpt-3.5-turbo), so by
// default any name is accepted while one model is served, and every response names the served model. With
// strict names only the served model's id and its explicit aliases (--model-alias) are accepted; the rest are 404.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"

namespace hearth::server {

struct ModelNames {
  std::string served;                // EngineInfo::model_id
  std::vector<std::string> aliases;  // accepted even with strict names; listed by /v1/models
  bool strict = false;               // --strict-model-names: any other name is a 404

  // Whether `id` is the served model or one of its aliases.
  [[nodiscard]] bool is_listed(const std::string& id) const;
  // Whether a request naming `requested` is served; an empty name (none sent) always is.
  [[nodiscard]] bool accepts(const std::string& requested) const;
  // 404 model_not_found naming the model and what is served, unless accepts(requested).
  [[nodiscard]] std::optional<ApiError> check(const std::string& requested) const;
};

// One /v1/models entry; an alias names what it stands for in meta.alias_of.
[[nodiscard]] nlohmann::json model_entry_json(const std::string& id, const ModelNames& names, int32_t n_ctx,
                                              int32_t block_size);
// GET /v1/models: the served model, then its aliases.
[[nodiscard]] nlohmann::json model_list_json(const ModelNames& names, int32_t n_ctx, int32_t block_size);

}  // namespace hearth::server

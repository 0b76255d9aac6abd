#pragma once
// The KV plan as JSON: GET /v1/kv/plan and `hearth plan --json` print the same objects.

#include <nlohmann/json.hpp>

#include <string_view>

#include "kv/kv_plan.h"
#include "server/api/api_error.h"

namespace hearth::server {

nlohmann::json kv_pool_json(const KvPlan& plan);
nlohmann::json memory_plan_json(const MemoryPlan& plan);

// A GET /v1/kv/plan count (`ctx`, `users`): decimal digits for a value in [1, max], else a 400 naming `name` with
// the text sent and the bound (so ctx=99999999999999999999 is refused, not clamped).
[[nodiscard]] ApiResult<int64_t> parse_plan_count(const char* name, std::string_view text, int64_t max);

}  // namespace hearth::server

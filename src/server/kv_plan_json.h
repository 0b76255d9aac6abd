#pragma once
// The KV plan as JSON: GET /v1/kv/plan and `hearth plan --json` print the same objects.

#include <nlohmann/json.hpp>

#include "kv/kv_plan.h"

namespace hearth::server {

nlohmann::json kv_pool_json(const KvPlan& plan);
nlohmann::json memory_plan_json(const MemoryPlan& plan);

}  // namespace hearth::server

#include "server/cache/kv_plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace hearth::server {

nlohmann::json kv_pool_json(const KvPlan& p) {
  return {{"kv_dtype", p.cost.dtype},
          {"kv_dtype_k", p.cost.dtype_k},
          {"kv_dtype_v", p.cost.dtype_v},
          {"block_size", p.block_size},
          {"budget_bytes", p.budget_bytes},
          {"pool_bytes", p.pool_bytes},
          {"bytes_per_token", p.bytes_per_token},
          {"scale_bytes_per_token", p.scale_bytes_per_token},
          {"num_blocks", p.num_blocks},
          {"capacity_tokens", p.capacity_tokens},
          {"users_at_4k", p.users_at(4096)},
          {"users_at_16k", p.users_at(16384)},
          {"window_layers", p.window.n_window_layers},
          {"window_tokens", p.window.window_tokens},
          {"num_window_slabs", p.num_window_slabs},
          {"bytes_per_window_slab", p.bytes_per_window_slab},
          {"window_plan_context",
           p.window.n_window_layers > 0 ? nlohmann::json(p.window.plan_context) : nlohmann::json()},
          {"summary", describe_kv_plan(p)}};
}

nlohmann::json memory_plan_json(const MemoryPlan& plan) {
  const MemoryPlanRequest& r = plan.request;
  nlohmann::json rows = nlohmann::json::array();
  for (const MemoryPlanRow& row : plan.rows) {
    nlohmann::json j = {{"kv_dtype", row.dtype},
                        {"bytes_per_token", row.bytes_per_token},
                        {"scale_bytes_per_token", row.scale_bytes_per_token},
                        {"kv_bytes", row.kv_bytes},
                        {"total_bytes", row.total_bytes}};
    if (r.memory_bytes > 0) {
      j["max_context"] = row.max_context;
      j["max_users"] = row.max_users;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json out = {{"model",
                         {{"n_layers", r.shape.n_layers},
                          {"n_kv_heads", r.shape.n_kv_heads},
                          {"head_dim", r.shape.head_dim},
                          {"weights_bytes", r.weights_bytes},
                          {"other_bytes", r.other_bytes}}},
                        {"context", r.context},
                        {"users", r.users},
                        {"block_size", r.block_size},
                        {"window_layers", r.window.n_window_layers},
                        {"window_tokens", r.window.window_tokens},
                        {"kv_dtype", r.dtype},
                        {"dtypes", rows},
                        {"requested", rows.empty() ? nlohmann::json() : nlohmann::json()}};
  for (const nlohmann::json& row : rows) {
    if (row["kv_dtype"] == r.dtype) out["requested"] = row;
  }
  if (r.memory_bytes > 0) out["memory_bytes"] = r.memory_bytes;
  if (!r.shape.uniform()) {  // layers of other sizes (Gemma 4): each K/V layer's heads and bytes per token
    nlohmann::json layers = nlohmann::json::array();
    const auto cost =
        std::find_if(r.costs.begin(), r.costs.end(), [&](const KvTokenCost& c) { return c.dtype == r.dtype; });
    for (int32_t il = 0; il < r.shape.n_layers; ++il) {
      nlohmann::json layer = {{"n_kv_heads", r.shape.layer(il).n_kv_heads}, {"head_dim", r.shape.layer(il).head_dim}};
      if (cost != r.costs.end()) layer["bytes_per_token"] = cost->layer_bytes_per_token[il];
      if (!r.window.layers.empty()) layer["window"] = static_cast<bool>(r.window.layers[il]);
      layers.push_back(std::move(layer));
    }
    out["model"]["kv_layers"] = std::move(layers);
  }
  return out;
}

ApiResult<int64_t> parse_plan_count(const char* name, std::string_view text, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool digits = !text.empty() && text.front() != '-' && end == text.data() + text.size();
  if (!digits || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return invalid_request(fmt::format("'{}' must be a positive integer, got '{}'", name, text), name, "invalid_value");
  }
  if (ec == std::errc::result_out_of_range || v < 1 || v > max) {
    return invalid_request(fmt::format("'{}' is {}, outside the allowed range [1, {}]", name, text, max), name,
                           "invalid_value");
  }
  return v;
}

}  // namespace hearth::server

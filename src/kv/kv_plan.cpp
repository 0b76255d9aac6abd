#include "kv/kv_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace hearth {
namespace {

// a × b × c, or nullopt when the product leaves int64.
std::optional<int64_t> checked_product(int64_t a, int64_t b, int64_t c) {
  int64_t ab = 0;
  int64_t abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return std::nullopt;
  return abc;
}

}  // namespace

int64_t KvPlan::users_at(int64_t context) const {
  if (context <= 0 || block_size <= 0) return 0;
  const int64_t blocks_per_user = (context + block_size - 1) / block_size;
  return num_blocks / blocks_per_user;
}

Result<KvPlan> plan_kv_pool(const KvShape& shape, const KvTokenCost& cost, int32_t block_size, int64_t budget_bytes) {
  if (block_size < 1 || block_size > 1024) return make_error("block size {} is out of range [1, 1024]", block_size);
  // Bounded far below overflow so that bytes per block (× 1024 tokens at most) stays exact too.
  if (cost.bytes_per_token < 1 || cost.bytes_per_token > (int64_t{1} << 40)) {
    return make_error("a KV token of {} costs {} bytes, outside [1, 2^40]", cost.dtype, cost.bytes_per_token);
  }
  KvPlan p;
  p.shape = shape;
  p.cost = cost;
  p.block_size = block_size;
  p.budget_bytes = budget_bytes;
  p.bytes_per_token = cost.bytes_per_token;
  p.scale_bytes_per_token = cost.scale_bytes_per_token;
  p.bytes_per_block = p.bytes_per_token * block_size;
  p.num_blocks = budget_bytes > 0 ? budget_bytes / p.bytes_per_block : 0;
  if (p.num_blocks < 1) {
    return make_error("KV memory of {} bytes holds no block: one block of {} tokens at {} needs {} bytes", budget_bytes,
                      block_size, cost.dtype, p.bytes_per_block);
  }
  if (p.num_blocks > (int64_t{1} << 30)) {
    return make_error("KV memory of {} bytes is {} blocks; at most 2^30 are supported", budget_bytes, p.num_blocks);
  }
  p.capacity_tokens = p.num_blocks * block_size;
  p.pool_bytes = p.num_blocks * p.bytes_per_block;
  return p;
}

namespace {

std::string context_label(int64_t ctx) {
  return ctx % 1024 == 0 ? fmt::format("{}k", ctx / 1024) : format_thousands(ctx);
}

}  // namespace

std::string describe_kv_plan(const KvPlan& p) {
  return fmt::format("KV pool {}, {}, {}/token, {} tokens, {} users at {} context or {} at {}",
                     format_bytes(p.pool_bytes), p.cost.dtype, format_bytes(p.bytes_per_token),
                     format_thousands(p.capacity_tokens), format_thousands(p.users_at(16384)), context_label(16384),
                     format_thousands(p.users_at(4096)), context_label(4096));
}

const MemoryPlanRow& MemoryPlan::requested() const {
  for (const MemoryPlanRow& row : rows) {
    if (row.dtype == request.dtype) return row;
  }
  HEARTH_CHECK(false, "memory plan has no row for {}", request.dtype);
  return rows.front();
}

namespace {

Result<void> check_plan_request(const MemoryPlanRequest& r) {
  if (r.block_size < 1 || r.block_size > 1024) return make_error("block size {} is out of range [1, 1024]", r.block_size);
  if (r.context < 1 || r.context > kMaxPlanContext) {
    return make_error("context is {} tokens, outside the supported range [1, {}]", r.context, kMaxPlanContext);
  }
  if (r.users < 1 || r.users > kMaxPlanUsers) {
    return make_error("users is {}, outside the supported range [1, {}]", r.users, kMaxPlanUsers);
  }
  if (r.memory_bytes < 0) return make_error("memory budget must not be negative");
  if (r.weights_bytes < 0) return make_error("weights size must not be negative");
  return {};
}

}  // namespace

Result<MemoryPlan> plan_memory(const MemoryPlanRequest& r) {
  HEARTH_TRY(check_plan_request(r));
  MemoryPlan plan;
  plan.request = r;
  const bool has_requested =
      std::any_of(r.costs.begin(), r.costs.end(), [&](const KvTokenCost& c) { return c.dtype == r.dtype; });
  if (!has_requested) {
    return make_error("no KV cost for dtype {} at {} layers × {} KV heads × head size {} (the format cannot hold the "
                      "head size, or the shape is out of range)",
                      r.dtype, r.shape.n_layers, r.shape.n_kv_heads, r.shape.head_dim);
  }
  const int64_t blocks_per_user = (r.context + r.block_size - 1) / r.block_size;
  for (const KvTokenCost& cost : r.costs) {
    MemoryPlanRow row;
    row.dtype = cost.dtype;
    row.bytes_per_token = cost.bytes_per_token;
    row.scale_bytes_per_token = cost.scale_bytes_per_token;
    const int64_t bytes_per_block = row.bytes_per_token * r.block_size;
    const std::optional<int64_t> kv_bytes = checked_product(r.users, blocks_per_user, bytes_per_block);
    if (!kv_bytes || *kv_bytes > std::numeric_limits<int64_t>::max() - r.weights_bytes) {
      return make_error("{} users × {} tokens at {} ({} bytes per token) is more bytes than a 64-bit count holds",
                        r.users, r.context, cost.dtype, row.bytes_per_token);
    }
    row.kv_bytes = *kv_bytes;
    row.total_bytes = r.weights_bytes + row.kv_bytes;
    if (r.memory_bytes > 0) {
      const int64_t kv_budget = std::max<int64_t>(0, r.memory_bytes - r.weights_bytes);
      const int64_t blocks = kv_budget / bytes_per_block;
      row.max_context = blocks / r.users * r.block_size;
      row.max_users = blocks / blocks_per_user;
    }
    plan.rows.push_back(row);
  }
  return plan;
}

std::string render_memory_plan(const MemoryPlan& plan) {
  const MemoryPlanRequest& r = plan.request;
  std::string out = fmt::format(
      "model: {} layers, {} KV heads × head size {}; weights {}\n"
      "asked: {} users × {} tokens of context, KV blocks of {} tokens{}\n\n",
      r.shape.n_layers, r.shape.n_kv_heads, r.shape.head_dim, format_bytes(r.weights_bytes), format_thousands(r.users),
      format_thousands(r.context), r.block_size,
      r.memory_bytes > 0 ? fmt::format(", in {} of memory", format_bytes(r.memory_bytes)) : std::string());
  out += fmt::format("{:<14} {:>12} {:>10} {:>12} {:>12}", "KV dtype", "bytes/token", "of scales", "KV", "total");
  if (r.memory_bytes > 0) {
    out +=
        fmt::format(" {:>16} {:>18}", fmt::format("max ctx × {}", r.users), fmt::format("max users @ {}", r.context));
  }
  out += "\n";
  for (const MemoryPlanRow& row : plan.rows) {
    const std::string mark = row.dtype == r.dtype ? " *" : "";
    out += fmt::format("{:<14} {:>12} {:>10} {:>12} {:>12}", row.dtype + mark, format_thousands(row.bytes_per_token),
                       format_thousands(row.scale_bytes_per_token), format_bytes(row.kv_bytes),
                       format_bytes(row.total_bytes));
    if (r.memory_bytes > 0) {
      out += fmt::format(" {:>16} {:>18}", format_thousands(row.max_context), format_thousands(row.max_users));
    }
    out += "\n";
  }
  out += "\n* the requested KV dtype. total = weights + KV; scratch buffers (a few MiB) come on top.\n";
  return out;
}

}  // namespace hearth

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

int64_t window_blocks_held(int64_t context, int32_t window, int32_t block_size) {
  if (context <= 0 || block_size <= 0) return 0;
  const int64_t first = window > 0 ? std::max<int64_t>(0, context - window + 1) / block_size : 0;
  return (context + block_size - 1) / block_size - first;
}

int64_t window_bytes_per_token(const KvShape& shape, const KvTokenCost& cost, const KvWindowSplit& split) {
  if (split.n_window_layers <= 0 || shape.n_layers <= 0) return 0;
  if (!split.layers.empty()) return kv_layer_bytes(cost, split.layers);
  return cost.bytes_per_token / shape.n_layers * split.n_window_layers;
}

int64_t KvPlan::users_at(int64_t context) const {
  if (context <= 0 || block_size <= 0) return 0;
  const int64_t blocks_per_user = (context + block_size - 1) / block_size;
  if (window.n_window_layers == 0) return num_blocks / blocks_per_user;
  const int64_t slabs_per_user = window_blocks_held(context, window.window_tokens, block_size);
  return std::min(window.n_window_layers < shape.n_layers ? num_blocks / blocks_per_user : INT64_MAX,
                  num_window_slabs / std::max<int64_t>(1, slabs_per_user));
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

Result<KvPlan> plan_kv_pool(const KvShape& shape, const KvTokenCost& cost, int32_t block_size, int64_t budget_bytes,
                            const KvWindowSplit& split) {
  auto plain = plan_kv_pool(shape, cost, block_size, budget_bytes);
  if (!plain || split.n_window_layers == 0) return plain;
  if (split.n_window_layers < 0 || split.n_window_layers > shape.n_layers || split.window_tokens < 1 ||
      split.plan_context < 1 || split.plan_context > kMaxPlanContext || split.min_window_slabs < 0 ||
      (split.layers.empty() && cost.bytes_per_token % shape.n_layers != 0) ||
      (!split.layers.empty() && static_cast<int32_t>(split.layers.size()) != shape.n_layers)) {
    return make_error("window slabs: {} of {} layers, a {}-token window, planned at {} tokens", split.n_window_layers,
                      shape.n_layers, split.window_tokens, split.plan_context);
  }
  KvPlan p = *plain;
  p.window = split;
  const int64_t window_bytes = window_bytes_per_token(shape, cost, split);
  const int64_t full_block = (cost.bytes_per_token - window_bytes) * block_size;  // may be 0
  const int64_t slab = window_bytes * block_size;
  const int64_t blocks_per_user = (split.plan_context + block_size - 1) / block_size;
  const int64_t slabs_per_user = window_blocks_held(split.plan_context, split.window_tokens, block_size);
  // Users at plan_context that fit, each with its blocks and slabs; the rest of the budget fills more blocks.
  const __int128 per_user =
      static_cast<__int128>(full_block) * blocks_per_user + static_cast<__int128>(slab) * slabs_per_user;
  const auto users = static_cast<int64_t>(static_cast<__int128>(budget_bytes) / per_user);
  int64_t slabs =
      std::max<int64_t>(split.min_window_slabs, std::max<int64_t>(1, users) * slabs_per_user + split.batch_slabs);
  // Every layer windowed (phi3): the slabs take the whole budget and the blocks, which then cost nothing, only
  // index them, as many as the slabs' users hold.
  if (full_block == 0) slabs = std::max(split.min_window_slabs, budget_bytes / slab);
  if (static_cast<__int128>(slabs) * slab > budget_bytes) {
    return make_error("KV memory of {} bytes holds no working set: the sliding-window layers alone need {} slabs of {} "
                      "bytes ({} bytes)",
                      budget_bytes, slabs, slab, static_cast<int64_t>(static_cast<__int128>(slabs) * slab));
  }
  const int64_t rest = budget_bytes - slabs * slab;
  // (Their metadata is not free: at most 2^20 of them then.)
  int64_t blocks = full_block > 0 ? rest / full_block
                                  : static_cast<int64_t>(std::min<__int128>(static_cast<__int128>(slabs) *
                                                                                blocks_per_user /
                                                                                std::max<int64_t>(1, slabs_per_user),
                                                                            int64_t{1} << 20));
  blocks = std::min<int64_t>(blocks, int64_t{1} << 30);
  if (blocks < 1) {
    return make_error("KV memory of {} bytes holds no block besides {} window slabs ({} bytes each, {} per block)",
                      budget_bytes, slabs, slab, full_block);
  }
  p.num_blocks = blocks;
  p.num_window_slabs = std::min<int64_t>(slabs, int64_t{1} << 30);
  p.bytes_per_block = full_block;
  p.bytes_per_window_slab = slab;
  p.capacity_tokens = blocks * block_size;
  p.pool_bytes = blocks * full_block + p.num_window_slabs * slab;
  return p;
}

namespace {

std::string context_label(int64_t ctx) {
  return ctx % 1024 == 0 ? fmt::format("{}k", ctx / 1024) : format_thousands(ctx);
}

}  // namespace

std::string describe_kv_plan(const KvPlan& p) {
  std::string out = fmt::format("KV pool {}, {}, {}/token, {} tokens, {} users at {} context or {} at {}",
                                format_bytes(p.pool_bytes), p.cost.dtype, format_bytes(p.bytes_per_token),
                                format_thousands(p.capacity_tokens), format_thousands(p.users_at(16384)),
                                context_label(16384), format_thousands(p.users_at(4096)), context_label(4096));
  if (p.window.n_window_layers > 0) {
    out += fmt::format("; {} sliding-window layers keep their last {} tokens only, in {} window slabs of {}",
                       p.window.n_window_layers, format_thousands(p.window.window_tokens),
                       format_thousands(p.num_window_slabs), format_bytes(p.bytes_per_window_slab));
  }
  return out;
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
  if (r.other_bytes < 0 || r.other_bytes > std::numeric_limits<int64_t>::max() - r.weights_bytes) {
    return make_error("memory beside the KV must be between 0 and what a 64-bit count holds");
  }
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
  const int32_t n_window = std::clamp(r.window.n_window_layers, 0, r.shape.n_layers);
  // The most blocks a window spans (ceil((W - 1) / bs) + 1, when it straddles block edges).
  const int64_t window_blocks_max =
      n_window > 0 ? (std::max(1, r.window.window_tokens) - 1 + r.block_size - 1) / r.block_size + 1 : 0;
  for (const KvTokenCost& cost : r.costs) {
    MemoryPlanRow row;
    row.dtype = cost.dtype;
    row.bytes_per_token = cost.bytes_per_token;
    row.scale_bytes_per_token = cost.scale_bytes_per_token;
    const int64_t bytes_per_block = row.bytes_per_token * r.block_size;
    // With window slabs, a user's blocks cost the other layers' share, and only the window's carry those layers.
    const int64_t window_share = n_window > 0 ? window_bytes_per_token(r.shape, cost, r.window) * r.block_size : 0;
    const int64_t user_bytes_per_block = bytes_per_block - window_share;
    auto user_bytes = [&](int64_t context) -> std::optional<int64_t> {
      const int64_t blocks = (context + r.block_size - 1) / r.block_size;
      const int64_t held = n_window > 0 ? std::min(blocks, window_blocks_max) : 0;
      const auto a = checked_product(1, blocks, user_bytes_per_block);
      const auto b = checked_product(1, held, window_share);
      if (!a || !b || *a > std::numeric_limits<int64_t>::max() - *b) return std::nullopt;
      return *a + *b;
    };
    std::optional<int64_t> per_user =
        checked_product(1, blocks_per_user, n_window > 0 ? user_bytes_per_block : bytes_per_block);
    if (per_user && n_window > 0) {
      const auto window = checked_product(1, window_blocks_held(r.context, r.window.window_tokens, r.block_size),
                                          window_share);
      per_user = window && *per_user <= std::numeric_limits<int64_t>::max() - *window
                     ? std::optional<int64_t>(*per_user + *window)
                     : std::nullopt;
    }
    if (per_user && r.state_bytes_per_user > 0) {
      per_user = *per_user <= std::numeric_limits<int64_t>::max() - r.state_bytes_per_user
                     ? std::optional<int64_t>(*per_user + r.state_bytes_per_user)
                     : std::nullopt;
    }
    const std::optional<int64_t> kv_bytes = per_user ? checked_product(1, r.users, *per_user) : std::nullopt;
    const int64_t fixed = r.weights_bytes + r.other_bytes;
    if (!kv_bytes || *kv_bytes > std::numeric_limits<int64_t>::max() - fixed) {
      return make_error("{} users × {} tokens at {} ({} bytes per token) is more bytes than a 64-bit count holds",
                        r.users, r.context, cost.dtype, row.bytes_per_token);
    }
    row.kv_bytes = *kv_bytes;
    row.total_bytes = fixed + row.kv_bytes;
    if (r.memory_bytes > 0 && n_window == 0) {
      const int64_t kv_budget = std::max<int64_t>(0, r.memory_bytes - fixed);
      const int64_t states = r.state_bytes_per_user * r.users;  // r.users is bounded: no overflow
      const int64_t blocks = std::max<int64_t>(0, kv_budget - states) / bytes_per_block;
      row.max_context = blocks / r.users * r.block_size;
      row.max_users = kv_budget / *per_user;
    } else if (r.memory_bytes > 0) {
      const int64_t kv_budget = std::max<int64_t>(0, r.memory_bytes - fixed);
      row.max_users = *per_user > 0 ? kv_budget / *per_user : 0;
      // The longest whole-block context every user can hold: user_bytes grows with the context (the window's
      // blocks counted at their most), so a bisection finds it.
      int64_t lo = 0;
      int64_t hi = kMaxPlanContext / r.block_size;
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        const auto bytes = user_bytes(mid * r.block_size);
        if (bytes && *bytes + r.state_bytes_per_user <= kv_budget / r.users) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      row.max_context = lo * r.block_size;
    }
    plan.rows.push_back(row);
  }
  return plan;
}

std::string render_memory_plan(const MemoryPlan& plan) {
  const MemoryPlanRequest& r = plan.request;
  std::string out = fmt::format(
      "model: {} layers, {} KV heads × head size {}; weights {}{}\n"
      "asked: {} users × {} tokens of context, KV blocks of {} tokens{}\n\n",
      r.shape.n_layers, r.shape.n_kv_heads, r.shape.head_dim, format_bytes(r.weights_bytes),
      r.other_bytes > 0 ? fmt::format(", {} beside them and the KV", format_bytes(r.other_bytes)) : std::string(),
      format_thousands(r.users),
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
  out += r.other_bytes > 0 ? "\n* the requested KV dtype. total = weights + KV + what is beside them.\n"
                           : "\n* the requested KV dtype. total = weights + KV.\n";
  if (r.state_bytes_per_user > 0) {
    out += fmt::format(
        "hybrid model: the KV above is the attention layers' ({} of them) plus each user's recurrent state, {} "
        "whatever the context. A prefix-cache checkpoint (the state after a block, so a hit can resume there) costs "
        "{} too; hearth serve keeps as many as a quarter of --kv-memory holds.\n",
        r.shape.n_layers, format_bytes(r.state_bytes_per_user), format_bytes(r.state_bytes_per_user));
  }
  return out;
}

}  // namespace hearth

#pragma once
// The KV memory plan: how many bytes one token of KV costs for a model shape and KV format, and what a memory
// budget holds. Pure arithmetic on shapes; the same numbers drive the engine's pool, `hearth plan`,
// GET /v1/kv/plan and /metrics, so what users read is what the server allocates.
//
//   bytes per token = layers × KV heads × (K head bytes + V head bytes)
//   K/V head bytes  = head_dim × bytes per value + the block scales of quantized formats
//   pool            = ⌊budget / (bytes per token × block size)⌋ blocks

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/kv_shape.h"
#include "util/result.h"
#include "util/units.h"

namespace hearth {

// Sliding-window layers whose K/V live in window slabs (kv_cache_manager.h): a user at context C holds C tokens on
// the other layers but only the blocks the next token reads on these (window_blocks_held).
struct KvWindowSplit {
  int32_t n_window_layers = 0;  // of the shape's layers; 0: a plain pool
  int32_t window_tokens = 0;    // W
  int64_t plan_context = 1024;  // the context per user the pool's split between blocks and slabs is sized for
  int64_t min_window_slabs = 0;  // at least this many slabs (what one sequence's window and batch need)
  int64_t batch_slabs = 0;       // slabs on top of the users' windows, for one step's prompt chunks
  // Which KV layers are windowed, one flag each, when layers differ in size (Gemma 4): the window's share of a
  // token is then those layers' bytes (KvTokenCost::layer_bytes_per_token). Empty: every layer costs the same.
  std::vector<bool> layers;
};

// Bytes of one token's K/V on the window layers of `split` at `cost` (0 without window layers).
int64_t window_bytes_per_token(const KvShape& shape, const KvTokenCost& cost, const KvWindowSplit& split);

// Blocks a user who has computed `context` tokens holds on the sliding-window layers: those the next token reads,
// ceil(context / bs) - floor(max(0, context - W + 1) / bs); at most ceil((W - 1) / bs) + 1.
int64_t window_blocks_held(int64_t context, int32_t window, int32_t block_size);

struct KvPlan {
  KvShape shape;
  KvTokenCost cost;  // the pool's KV format by name and bytes
  int32_t block_size = 0;
  int64_t budget_bytes = 0;
  int64_t bytes_per_token = 0;        // scales included
  int64_t scale_bytes_per_token = 0;  // of which scales
  int64_t bytes_per_block = 0;
  int64_t num_blocks = 0;
  int64_t capacity_tokens = 0;  // num_blocks × block_size
  int64_t pool_bytes = 0;       // num_blocks × bytes_per_block (+ the window slabs) ≤ budget_bytes
  // With window slabs, bytes_per_block counts the other layers only; the sliding-window layers' K/V of a block is
  // a slab of bytes_per_window_slab.
  KvWindowSplit window;
  int64_t num_window_slabs = 0;
  int64_t bytes_per_window_slab = 0;

  // Users that fit at once when each holds `context` tokens (whole blocks each, nothing shared).
  int64_t users_at(int64_t context) const;
};

// The pool a budget holds at `cost` per token (tensor/kv_dtype.h: kv_token_cost). Error when the cost is not
// positive, the block size is outside [1, 1024], or the budget holds no block (the message has the numbers).
Result<KvPlan> plan_kv_pool(const KvShape& shape, const KvTokenCost& cost, int32_t block_size, int64_t budget_bytes);
// With window slabs (split.n_window_layers > 0): the budget is split so that a user at split.plan_context gets
// whole blocks for it and slabs for window_blocks_held of it, plus split.batch_slabs for the prompt chunks a step
// computes, and at least split.min_window_slabs slabs.
Result<KvPlan> plan_kv_pool(const KvShape& shape, const KvTokenCost& cost, int32_t block_size, int64_t budget_bytes,
                            const KvWindowSplit& split);

// One line for logs: "KV pool 2.00 GiB, q8_0, 34.0 KiB/token, 61,680 tokens, 3 users at 16k context or 15 at 4k".
std::string describe_kv_plan(const KvPlan& plan);

// What a model needs in memory at a context × users, for each KV dtype, and what fits in a budget: the table of
// `hearth plan` and GET /v1/kv/plan. Weights are what the caller counts (hearth plan: resident, model_memory.h);
// other_bytes is the rest that is not KV (the model's scratch and tokenizer, the server's own memory).
// The inputs are bounded so that every product stays far from int64 overflow (and is checked regardless).
inline constexpr int64_t kMaxPlanContext = int64_t{1} << 24;  // 16,777,216 tokens per user
inline constexpr int64_t kMaxPlanUsers = int64_t{1} << 20;    // 1,048,576 users
struct MemoryPlanRequest {
  KvShape shape;
  int64_t weights_bytes = 0;
  int64_t other_bytes = 0;  // memory beside weights and KV; 0 when not known
  int32_t block_size = 16;
  int64_t context = 0;  // tokens per user
  int64_t users = 1;
  std::vector<KvTokenCost> costs;  // one row each (tensor/kv_dtype.h: kv_dtype_costs)
  std::string dtype = "f16";       // the row the totals are for: one of the costs' dtype names
  int64_t memory_bytes = 0;        // 0: no budget given
  KvWindowSplit window;            // sliding-window layers kept in window slabs (plan_context unused here)
  // Hybrid models: each user's recurrent state (whatever the context), counted with its KV; and one prefix-cache
  // checkpoint's bytes (the same state), for the report. 0 for attention-only models.
  int64_t state_bytes_per_user = 0;
};

struct MemoryPlanRow {
  std::string dtype;
  int64_t bytes_per_token = 0;
  int64_t scale_bytes_per_token = 0;
  int64_t kv_bytes = 0;     // users × whole blocks of `context` tokens (window layers: window_blocks_held), plus
                            // users × state_bytes_per_user
  int64_t total_bytes = 0;  // weights + other + kv
  // With a budget: the longest context each of `users` users can hold, and how many users fit at `context`.
  int64_t max_context = 0;
  int64_t max_users = 0;
};

struct MemoryPlan {
  MemoryPlanRequest request;
  std::vector<MemoryPlanRow> rows;  // one per cost, in order
  const MemoryPlanRow& requested() const;
};

// Error (with the numbers) when block_size is outside [1, 1024], context outside [1, kMaxPlanContext], users
// outside [1, kMaxPlanUsers], memory_bytes negative, or a byte count would overflow int64.
Result<MemoryPlan> plan_memory(const MemoryPlanRequest& request);
// The plan as a table a person reads.
std::string render_memory_plan(const MemoryPlan& plan);

}  // namespace hearth

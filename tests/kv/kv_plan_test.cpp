// The KV memory plan against hand-computed numbers: stories260K and the synthetic 1B shape.
#include "kv/kv_plan.h"

#include "tensor/kv_dtype.h"

#include <gtest/gtest.h>

#include <limits>

namespace hearth {
namespace {

constexpr KvShape kStories{5, 4, 8};  // 5 layers, 4 KV heads of 8
constexpr KvShape k1B{16, 8, 64};     // 16 layers, 8 KV heads of 64
constexpr KvFormat kF16{KvDtype::kF16, KvDtype::kF16};
constexpr KvFormat kQ8{KvDtype::kQ8_0, KvDtype::kQ8_0};
constexpr KvFormat kQ4{KvDtype::kQ4_0, KvDtype::kQ4_0};

KvTokenCost cost(const KvShape& shape, const KvFormat& format) {
  return *kv_token_cost(shape, format);
}

TEST(KvPlan, BytesPerTokenByHand) {
  // stories260K: layers × KV heads × (K + V head bytes). q8_0: 8 values + 2-byte scale; q4_0: 4 bytes + scale.
  EXPECT_EQ(*kv_bytes_per_token(kStories, {}), 5 * 4 * (32 + 32));
  EXPECT_EQ(*kv_bytes_per_token(kStories, kF16), 640);
  EXPECT_EQ(*kv_bytes_per_token(kStories, kQ8), 400);
  EXPECT_EQ(*kv_bytes_per_token(kStories, kQ4), 240);
  // 1B: q8_0 head = 64 + 2, q4_0 head = 2 × (16 + 2).
  EXPECT_EQ(*kv_bytes_per_token(k1B, kF16), 16 * 8 * 256);
  EXPECT_EQ(*kv_bytes_per_token(k1B, kQ8), 16 * 8 * 132);
  EXPECT_EQ(*kv_bytes_per_token(k1B, kQ4), 16 * 8 * 72);
  EXPECT_EQ(*kv_bytes_per_token(k1B, {KvDtype::kQ8_0, KvDtype::kF16}), 16 * 8 * (66 + 128));
}

TEST(KvPlan, QuantizedFormatsFitTheRequiredMultipleOfF16Tokens) {
  // Scales included: q8_0 ≥ 1.9×, q4_0 ≥ 3.5× the tokens of f16 in the same budget.
  for (int64_t budget : {int64_t{64} << 20, int64_t{2} << 30}) {
    const auto f16 = *plan_kv_pool(k1B, cost(k1B, kF16), 16, budget);
    const auto q8 = *plan_kv_pool(k1B, cost(k1B, kQ8), 16, budget);
    const auto q4 = *plan_kv_pool(k1B, cost(k1B, kQ4), 16, budget);
    EXPECT_GE(static_cast<double>(q8.capacity_tokens) / f16.capacity_tokens, 1.9);
    EXPECT_GE(static_cast<double>(q4.capacity_tokens) / f16.capacity_tokens, 3.5);
    EXPECT_LE(q4.pool_bytes, budget);
  }
}

TEST(KvPlan, PoolNeverExceedsTheBudgetAndSaysWhyWhenNothingFits) {
  const auto p = *plan_kv_pool(k1B, cost(k1B, kQ8), 16, (int64_t{2} << 30) + 12345);
  EXPECT_EQ(p.bytes_per_block, 16 * 16896);
  EXPECT_EQ(p.num_blocks, ((int64_t{2} << 30) + 12345) / (16 * 16896));
  EXPECT_LE(p.pool_bytes, p.budget_bytes);
  EXPECT_GT(p.pool_bytes + p.bytes_per_block, p.budget_bytes);
  auto none = plan_kv_pool(k1B, cost(k1B, kQ8), 16, 1000);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("270336 bytes"), std::string::npos) << none.error().message;
}

TEST(KvPlan, StartupLineMatchesTheIssueFormat) {
  // 2 GiB of q8_0 for the 1B shape: 16,896 B/token → 127,100 blocks... computed by hand below.
  const auto p = *plan_kv_pool(k1B, cost(k1B, kQ8), 16, int64_t{2} << 30);
  const int64_t blocks = (int64_t{2} << 30) / (16 * 16896);  // 7943
  EXPECT_EQ(p.num_blocks, blocks);
  EXPECT_EQ(p.users_at(16384), blocks / 1024);  // 7
  EXPECT_EQ(p.users_at(4096), blocks / 256);    // 31
  EXPECT_EQ(describe_kv_plan(p),
            "KV pool 2.00 GiB, q8_0, 16.5 KiB/token, 127,088 tokens, 7 users at 16k context or 31 at 4k");
}

TEST(KvPlan, MemoryPlanByHandFor1B) {
  MemoryPlanRequest r;
  r.shape = k1B;
  r.weights_bytes = 1'000'000'000;
  r.context = 4096;
  r.users = 4;
  r.memory_bytes = int64_t{8} << 30;
  r.costs = kv_dtype_costs(k1B, kF16);
  const auto plan = *plan_memory(r);
  ASSERT_EQ(plan.rows.size(), 5u);
  const auto& f16 = plan.requested();
  EXPECT_EQ(f16.bytes_per_token, 32768);
  EXPECT_EQ(f16.kv_bytes, int64_t{4} * 4096 * 32768);  // 512 MiB
  EXPECT_EQ(f16.total_bytes, 1'000'000'000 + (int64_t{512} << 20));
  // KV budget 8 GiB − 1e9 = 7,589,934,592 bytes = 14,476 blocks of 524,288.
  EXPECT_EQ(f16.max_users, 14476 / 256);
  EXPECT_EQ(f16.max_context, 14476 / 4 * 16);
  const auto text = render_memory_plan(plan);
  EXPECT_NE(text.find("f16 *"), std::string::npos) << text;
  EXPECT_NE(text.find("32,768"), std::string::npos) << text;
  EXPECT_NE(text.find("57,904"), std::string::npos) << text;
}

TEST(KvPlan, MemoryPlanForStoriesAndBadRequests) {
  MemoryPlanRequest r;
  r.shape = kStories;
  r.weights_bytes = 1185376;
  r.context = 512;
  r.users = 3;
  r.costs = kv_dtype_costs(kStories, kQ4);
  r.dtype = "q4_0";
  const auto plan = *plan_memory(r);
  EXPECT_EQ(plan.requested().bytes_per_token, 240);
  EXPECT_EQ(plan.requested().kv_bytes, 3 * 512 * 240);
  EXPECT_EQ(plan.requested().max_users, 0);  // no budget given
  r.users = 0;
  EXPECT_FALSE(plan_memory(r));
  r.users = 1;
  r.context = 0;
  EXPECT_FALSE(plan_memory(r));
}

// GET /v1/kv/plan?ctx=2147483647&users=2147483647 answered a negative kv_bytes.
TEST(KvPlan, HugeContextOrUsersAreErrorsWithTheNumbers) {
  MemoryPlanRequest r;
  r.shape = k1B;
  r.context = 2147483647;
  r.users = 1;
  auto plan = plan_memory(r);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("2147483647"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("16777216"), std::string::npos) << plan.error().message;
  r.context = 4096;
  r.users = 2147483647;
  plan = plan_memory(r);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("users is 2147483647"), std::string::npos) << plan.error().message;
  // At both maxima the f32 row of the 1B shape (65,536 bytes per token) is 2^60 bytes: exact, positive.
  r.context = kMaxPlanContext;
  r.users = kMaxPlanUsers;
  r.costs = kv_dtype_costs(k1B, kF16);
  plan = plan_memory(r);
  ASSERT_TRUE(plan) << plan.error().message;
  for (const MemoryPlanRow& row : plan->rows) {
    EXPECT_GT(row.kv_bytes, 0) << row.dtype;
    EXPECT_EQ(row.kv_bytes, kMaxPlanContext * kMaxPlanUsers * row.bytes_per_token) << row.dtype;
  }
}

TEST(KvPlan, ProductsThatLeaveInt64AreErrorsNotNegativeBytes) {
  MemoryPlanRequest r;
  r.shape = KvShape{65536, 65536, 128};  // a hostile header: 2^42 bytes per f32 token
  r.context = kMaxPlanContext;
  r.users = kMaxPlanUsers;
  const KvFormat f32{KvDtype::kF32, KvDtype::kF32};
  r.dtype = "f32";
  EXPECT_FALSE(kv_token_cost(r.shape, f32));
  r.costs = kv_dtype_costs(r.shape, f32);
  EXPECT_FALSE(plan_memory(r));
  r.shape = KvShape{512, 64, 128};  // 2^25 bytes per f32 token: × 2^24 tokens × 2^20 users = 2^69
  r.costs = kv_dtype_costs(r.shape, f32);
  auto plan = plan_memory(r);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("64-bit"), std::string::npos) << plan.error().message;
  r.weights_bytes = std::numeric_limits<int64_t>::max();
  r.users = 1;
  r.context = 1;
  EXPECT_FALSE(plan_memory(r));  // weights + KV would overflow
}

TEST(KvPlan, ParsesSizes) {
  EXPECT_EQ(*parse_bytes("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(*parse_bytes("512 MiB"), int64_t{512} << 20);
  EXPECT_EQ(*parse_bytes("1.5g"), int64_t{3} << 29);
  EXPECT_EQ(*parse_bytes("4096"), 4096);
  EXPECT_FALSE(parse_bytes("lots"));
  EXPECT_FALSE(parse_bytes("-1GiB"));
  EXPECT_FALSE(parse_bytes("3 parsecs"));
  EXPECT_EQ(format_thousands(61680), "61,680");
  EXPECT_EQ(format_bytes(34816), "34.0 KiB");
}

// Window slabs, the gemma3 shape of bench/sliding-window-household (6 layers, 2 KV heads of 64, f16: 512 bytes per
// layer and token), 5 local layers with a 256-token window, planned at 4,096 tokens per user: a user holds 256
// blocks of the global layer (256 × 8 KiB) and 16 slabs of the local ones (16 × 40 KiB), 2.62 MiB against 12 MiB
// with every layer's full KV.
TEST(KvPlan, WindowSlabsSplitTheBudgetForUsersAtThePlanContext) {
  constexpr KvShape kGemma3{6, 2, 64};
  const KvTokenCost c = cost(kGemma3, kF16);
  ASSERT_EQ(c.bytes_per_token, 6 * 512);
  const KvWindowSplit split{.n_window_layers = 5, .window_tokens = 256, .plan_context = 4096, .min_window_slabs = 50};
  EXPECT_EQ(window_blocks_held(4096, 256, 16), 16);
  const int64_t per_user = 256 * 8192 + 16 * 40960;
  const int64_t budget = 256ll << 20;
  const auto plan = plan_kv_pool(kGemma3, c, 16, budget, split);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->bytes_per_block, 8192);
  EXPECT_EQ(plan->bytes_per_window_slab, 40960);
  const int64_t users = budget / per_user;  // 97
  EXPECT_EQ(plan->num_window_slabs, users * 16);
  EXPECT_EQ(plan->num_blocks, (budget - users * 16 * 40960) / 8192);
  EXPECT_LE(plan->pool_bytes, budget);
  EXPECT_GT(plan->pool_bytes, budget - 8192);
  EXPECT_EQ(plan->users_at(4096), users);
  // The plain pool holds 12 MiB per user at 4,096 tokens: 4.6x fewer.
  const auto plain = plan_kv_pool(kGemma3, c, 16, budget);
  EXPECT_EQ(plain->users_at(4096), budget / (256 * 16 * 6 * 512));
  EXPECT_GT(plan->users_at(4096), 4 * plain->users_at(4096));
  // At least the slabs one request needs, even where the plan context would give fewer.
  const auto tight = plan_kv_pool(kGemma3, c, 16, 8 << 20, split);
  ASSERT_TRUE(tight.ok()) << tight.error().message;
  EXPECT_EQ(tight->num_window_slabs, 50);
  // A budget below those slabs is refused with the numbers.
  const auto none = plan_kv_pool(kGemma3, c, 16, 1 << 20, split);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("50 slabs"), std::string::npos) << none.error().message;
}

// The engine's split adds one step's prompt chunks to the users' windows; with every layer windowed (phi3) the slabs
// take the whole budget and the blocks, which then cost nothing, only index them.
TEST(KvPlan, WindowSlabsForTheBatchAndForAllWindowedLayers) {
  constexpr KvShape kGemma3{6, 2, 64};
  const KvTokenCost c = cost(kGemma3, kF16);
  const int64_t budget = 256ll << 20;
  const auto plan = plan_kv_pool(kGemma3, c, 16, budget,
                                 {.n_window_layers = 5, .window_tokens = 256, .plan_context = 4096, .batch_slabs = 33});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->num_window_slabs, 97 * 16 + 33);
  EXPECT_EQ(plan->num_blocks, (budget - (97 * 16 + 33) * 40960) / 8192);
  const auto all = plan_kv_pool(kGemma3, c, 16, 8 << 20,
                                {.n_window_layers = 6, .window_tokens = 256, .plan_context = 1024, .batch_slabs = 33});
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->bytes_per_block, 0);
  EXPECT_EQ(all->bytes_per_window_slab, 6 * 512 * 16);
  EXPECT_EQ(all->num_window_slabs, (8 << 20) / (6 * 512 * 16));  // 170
  EXPECT_EQ(all->num_blocks, 170 * 64 / 16);                      // 64 blocks per 16 slabs at 1,024 tokens
  EXPECT_EQ(all->pool_bytes, 170 * 6 * 512 * 16);
}

// hearth plan's rows with window slabs: what HeldSlabsMatchThePlanPerUser measures per user, times users; the
// longest context and the users that fit.
TEST(KvPlan, MemoryPlanCountsTheWindowOnly) {
  MemoryPlanRequest r;
  r.shape = {6, 2, 64};
  r.block_size = 16;
  r.context = 4096;
  r.users = 8;
  r.costs = kv_dtype_costs(r.shape, kF16);
  r.dtype = "f16";
  r.window = {.n_window_layers = 5, .window_tokens = 256};
  r.memory_bytes = 64ll << 20;
  const auto plan = plan_memory(r);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const int64_t per_user = 256 * 8192 + 16 * 40960;
  EXPECT_EQ(plan->requested().kv_bytes, 8 * per_user);
  EXPECT_EQ(plan->requested().max_users, (64ll << 20) / per_user);
  // 8 users in 64 MiB: 8 MiB each, of which at most 17 slabs (680 KiB); the rest buys global blocks.
  const int64_t ctx = plan->requested().max_context;
  EXPECT_EQ(ctx, ((8ll << 20) - 17 * 40960) / 8192 * 16);
}

}  // namespace
}  // namespace hearth

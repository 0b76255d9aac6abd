// KvStorage: its size is the plan's to the byte, and the memory it really takes, measured as the process's
// own RSS growth while every block is filled, matches that plan within 5%.
#include "model/kv_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_plan.h"

namespace hearth {
namespace {

// Resident set size of this process in bytes, from /proc/self/status.
int64_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return -1;
}

TEST(KvStorage, SizeIsThePlanAndRssGrowthWhileFillingMatchesIt) {
  if (rss_bytes() < 0) GTEST_SKIP() << "no /proc/self/status here";
  const KvShape shape{12, 12, 64};  // the synthetic 110M shape
  const int64_t budget = int64_t{48} << 20;
  std::vector<float> row(static_cast<size_t>(shape.n_kv_heads) * shape.head_dim);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (float& x : row) x = dist(rng);
  for (KvDtype type : all_kv_dtypes()) {
    const KvFormat format{type, type};
    const auto plan = *plan_kv_pool(shape, *kv_token_cost(shape, format), 16, budget);
    const int64_t before = rss_bytes();
    auto storage = *KvStorage::create(shape, format, 16, static_cast<int32_t>(plan.num_blocks));
    EXPECT_EQ(static_cast<int64_t>(storage->bytes_total()), plan.pool_bytes) << format.name();
    EXPECT_EQ(static_cast<int64_t>(storage->bytes_per_token()), plan.bytes_per_token) << format.name();
    const int64_t allocated = rss_bytes();
    // Nothing is committed before KV is written: memory grows with the KV really held.
    EXPECT_LT(allocated - before, plan.pool_bytes / 20) << format.name();
    for (int32_t b = 0; b < storage->num_blocks(); ++b) {
      for (int32_t layer = 0; layer < shape.n_layers; ++layer) {
        for (int32_t slot = 0; slot < 16; ++slot) {
          storage->store_row(layer, 0, BlockId{b}, slot, row.data());
          storage->store_row(layer, 1, BlockId{b}, slot, row.data());
        }
      }
    }
    const int64_t growth = rss_bytes() - before;
    const int64_t fixed_overhead = int64_t{1} << 20;
    EXPECT_GE(growth, plan.pool_bytes * 95 / 100) << format.name();
    EXPECT_LE(growth, plan.pool_bytes * 105 / 100 + fixed_overhead) << format.name();
  }
}

TEST(KvStorage, RejectsHeadSizesAFormatCannotHold) {
  auto bad = KvStorage::create({2, 1, 7}, {KvDtype::kQ4_0, KvDtype::kF16}, 16, 4);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("even head size"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(KvStorage::create({0, 1, 8}, {}, 16, 4));
}

TEST(KvStorage, CopySlotsCopiesEveryLayerOfKAndV) {
  const KvShape shape{3, 2, 8};
  auto s = *KvStorage::create(shape, {KvDtype::kQ8_0, KvDtype::kQ4_0}, 4, 3);
  std::vector<float> row(16);
  for (int i = 0; i < 16; ++i) row[i] = static_cast<float>(i) - 7.5f;
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (int32_t slot = 0; slot < 4; ++slot) {
      s->store_row(layer, 0, BlockId{1}, slot, row.data());
      s->store_row(layer, 1, BlockId{1}, slot, row.data());
    }
  }
  s->copy_slots(BlockId{2}, BlockId{1}, 3);
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int32_t slot = 0; slot < 3; ++slot) {
        EXPECT_EQ(
            std::memcmp(s->row(layer, kv, BlockId{2}, slot), s->row(layer, kv, BlockId{1}, slot), s->row_bytes(kv)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace hearth

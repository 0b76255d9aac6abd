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
#include "tensor/kv_dtype.h"
#include "util/huge_pages.h"
#include "util/resident_pages.h"  // tests/util

namespace hearth {
namespace {

using testing::resident_pages;

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
    int64_t unwritten_allowance = plan.pool_bytes / 20;
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer fills the first 4 KiB of a new allocation, and in a region offered for huge pages the kernel
    // may back that with (or collapse it into) a whole 2 MiB page.
    unwritten_allowance += static_cast<int64_t>(kHugePageBytes);
#endif
    EXPECT_LT(allocated - before, unwritten_allowance) << format.name();
    for (int32_t b = 0; b < storage->num_blocks(); ++b) {
      for (int32_t layer = 0; layer < shape.n_layers; ++layer) {
        for (int32_t slot = 0; slot < 16; ++slot) {
          storage->store_row(layer, 0, BlockId{b}, slot, row.data());
          storage->store_row(layer, 1, BlockId{b}, slot, row.data());
        }
      }
    }
    const int64_t growth = rss_bytes() - before;
    int64_t fixed_overhead = int64_t{1} << 20;
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer's shadow of the pages written: one byte per 8, on 2 MiB pages where THP is "always".
    fixed_overhead += plan.pool_bytes / 8 + (int64_t{4} << 20);
#endif
    EXPECT_GE(growth, plan.pool_bytes * 95 / 100) << format.name();
    EXPECT_LE(growth, plan.pool_bytes * 105 / 100 + fixed_overhead) << format.name();
  }
}

TEST(KvStorage, ThePoolStartsOnA2MiBBoundaryForHugePages) {
  // A pool of at least 2 MiB comes from allocate_on_huge_pages: the only allocation here that starts on 2 MiB.
  auto storage = *KvStorage::create({12, 12, 64}, {}, 16, 256);
  ASSERT_GE(storage->bytes_total(), kHugePageBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(storage->head_slice(0, 0, BlockId{0}, 0, 0)) % kHugePageBytes, 0u);
}

TEST(KvStorage, CommitBlocksMakesTheirPagesResidentInEveryPlaneAndChangesNoByte) {
  // Head size 512 (f16: 1 KiB a token's head slice, 4 KiB a slot row of 4 heads), so a block of 16 is 64 KiB
  // of each plane and 2 MiB is 32 blocks: blocks 64-71 lie inside the pool's third 2 MiB page of each plane.
  const KvShape shape{2, 4, 512};
  auto storage = *KvStorage::create(shape, {KvDtype::kF16, KvDtype::kF16}, 16, 256);
  std::vector<float> row(static_cast<size_t>(shape.n_kv_heads) * shape.head_dim, 1.5f);
  storage->store_row(1, 1, BlockId{3}, 5, row.data());
  const size_t block_bytes = storage->row_bytes(0) * 16;
  ASSERT_EQ(block_bytes, size_t{64} << 10);
  auto plane_block = [&](int32_t layer, int kv, int32_t block) {
    return storage->head_slice(layer, kv, BlockId{block}, 0, 0);
  };
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) EXPECT_EQ(resident_pages(plane_block(layer, kv, 64), 8 * block_bytes), 0u);
  }
  storage->commit_blocks(64, 72);
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      EXPECT_EQ(resident_pages(plane_block(layer, kv, 64), 8 * block_bytes), 8 * block_bytes / 4096)
          << "layer " << layer << " kv " << kv;
      // Far from the committed blocks (another 2 MiB page), nothing was committed.
      EXPECT_EQ(resident_pages(plane_block(layer, kv, 200), block_bytes), 0u) << "layer " << layer << " kv " << kv;
    }
  }
  // The written row kept its bytes; committing another range over it changes none either.
  storage->commit_blocks(0, 8);
  for (int32_t h = 0; h < shape.n_kv_heads; ++h) {
    const uint8_t* slice = storage->head_slice(1, 1, BlockId{3}, 5, h);
    for (int32_t d = 0; d < shape.head_dim; ++d) {
      uint16_t half = 0;
      std::memcpy(&half, slice + 2 * d, 2);
      ASSERT_EQ(half, 0x3E00) << "head " << h << " element " << d;  // 1.5 in f16
    }
  }
  storage->commit_blocks(150, 150);  // an empty range touches nothing
  EXPECT_EQ(resident_pages(plane_block(0, 0, 150), block_bytes), 0u);
}

TEST(KvStorage, RejectsHeadSizesAFormatCannotHold) {
  auto bad = KvStorage::create({2, 1, 7}, {KvDtype::kQ4_0, KvDtype::kF16}, 16, 4);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("even head size"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(KvStorage::create({0, 1, 8}, {}, 16, 4));
}

TEST(KvStorage, CopySlotsCopiesEveryLayerOfKAndV) {
  // Each slot's row differs, so a slot copied to the wrong place (or a head's run cut short) shows; the slot past
  // n_slots must keep what the destination held.
  const KvShape shape{3, 2, 8};
  auto s = *KvStorage::create(shape, {KvDtype::kQ8_0, KvDtype::kQ4_0}, 4, 3);
  std::vector<float> row(16);
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (int32_t slot = 0; slot < 4; ++slot) {
      for (int i = 0; i < 16; ++i) row[i] = static_cast<float>(i + 5 * slot + 17 * layer) - 7.5f;
      for (int kv = 0; kv < 2; ++kv) s->store_row(layer, kv, BlockId{1}, slot, row.data());
      for (float& x : row) x = -x;
      for (int kv = 0; kv < 2; ++kv) s->store_row(layer, kv, BlockId{2}, slot, row.data());
    }
  }
  s->copy_slots(BlockId{2}, BlockId{1}, 3);
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      const size_t bytes = kv_head_bytes(kv == 0 ? KvDtype::kQ8_0 : KvDtype::kQ4_0, 8);
      for (int32_t slot = 0; slot < 4; ++slot) {
        for (int32_t h = 0; h < 2; ++h) {
          const int same = std::memcmp(s->head_slice(layer, kv, BlockId{2}, slot, h),
                                       s->head_slice(layer, kv, BlockId{1}, slot, h), bytes);
          if (slot < 3) {
            EXPECT_EQ(same, 0) << "layer " << layer << " kv " << kv << " slot " << slot << " head " << h;
          } else {
            EXPECT_NE(same, 0) << "slot 3 was past n_slots and must not be copied";
          }
        }
      }
    }
  }
}

TEST(KvStorage, LayerViewFindsEveryStoredHeadSlice) {
  // The view attention reads through and the slices store_row writes agree for every position and head, through
  // a scrambled block table.
  const KvShape shape{2, 3, 8};
  auto s = *KvStorage::create(shape, {KvDtype::kF32, KvDtype::kF16}, 4, 5);
  const std::vector<BlockId> table{BlockId{3}, BlockId{0}, BlockId{4}};
  std::vector<float> row(24);
  for (int32_t pos = 0; pos < 12; ++pos) {
    for (int i = 0; i < 24; ++i) row[i] = static_cast<float>(100 * pos + i);
    for (int kv = 0; kv < 2; ++kv) s->store_row(1, kv, table[pos / 4], pos % 4, row.data());
  }
  for (int kv = 0; kv < 2; ++kv) {
    const PagedKvView view = s->layer_view(1, kv, table);
    for (int32_t pos = 0; pos < 12; ++pos) {
      for (int32_t h = 0; h < 3; ++h) {
        EXPECT_EQ(view.head(pos, h), s->head_slice(1, kv, table[pos / 4], pos % 4, h));
        std::vector<float> got(8);
        kv_dequantize_head_reference(view.dtype, view.head(pos, h), got.data(), 8);
        for (int d = 0; d < 8; ++d) ASSERT_EQ(got[d], static_cast<float>(100 * pos + 8 * h + d)) << kv << " " << pos;
      }
    }
  }
}

}  // namespace
}  // namespace hearth

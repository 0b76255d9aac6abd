// KvPrefaulter: the pool's pages just past the blocks handed out are committed (resident) in every plane before a
// block is written there, never further than its reserve, and committing never changes a byte a writer stored, even
// while that writer runs beside it.
#include "engine/kv_prefault.h"

#include <gtest/gtest.h>
#include <cstring>
#include <thread>
#include <vector>

#include "model/kv_storage.h"
#include "util/huge_pages.h"
#include "util/resident_pages.h"  // tests/util

namespace hearth {
namespace {

using testing::resident_pages;

// f16 K/V of 4 heads of 512: a block of 16 tokens is 64 KiB of each plane, so 2 MiB holds 32 blocks.
constexpr KvShape kShape{2, 4, 512};
constexpr size_t kBlockBytes = size_t{64} << 10;

std::unique_ptr<KvStorage> make_storage(int32_t blocks) {
  return *KvStorage::create(kShape, {KvDtype::kF16, KvDtype::kF16}, 16, blocks);
}

// Whether blocks [begin, end) are resident in all four planes.
bool resident(const KvStorage& s, int32_t begin, int32_t end) {
  for (int32_t layer = 0; layer < kShape.n_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      const uint8_t* first = s.head_slice(layer, kv, BlockId{begin}, 0, 0);
      const size_t bytes = static_cast<size_t>(end - begin) * kBlockBytes;
      if (resident_pages(first, bytes) != bytes / 4096) return false;
    }
  }
  return true;
}

bool none_resident(const KvStorage& s, int32_t block) {
  for (int32_t layer = 0; layer < kShape.n_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      if (resident_pages(s.head_slice(layer, kv, BlockId{block}, 0, 0), kBlockBytes) != 0) return false;
    }
  }
  return true;
}

TEST(KvPrefaulter, CommitsOneHugePageOfBlocksAheadOfTheHighWaterInEveryPlane) {
  auto storage = make_storage(256);
  KvPrefaulter prefaulter(*storage, /*idle_priority=*/false);
  EXPECT_EQ(prefaulter.reserve_blocks(), static_cast<int32_t>(kHugePageBytes / kBlockBytes));
  prefaulter.ahead_of(0);
  prefaulter.wait_until_done();
  EXPECT_EQ(prefaulter.committed(), 32);
  EXPECT_TRUE(resident(*storage, 0, 32));
  EXPECT_TRUE(none_resident(*storage, 128));  // far past the reserve (a 2 MiB page of its own)

  // Blocks below the high water were the writer's to commit; the reserve moves on from it.
  prefaulter.ahead_of(70);
  prefaulter.wait_until_done();
  EXPECT_EQ(prefaulter.committed(), 102);
  EXPECT_TRUE(resident(*storage, 70, 102));
  EXPECT_TRUE(none_resident(*storage, 200));

  // A high water that goes back (it never does) asks for nothing new; the end of the pool bounds the reserve.
  prefaulter.ahead_of(10);
  prefaulter.ahead_of(250);
  prefaulter.wait_until_done();
  EXPECT_EQ(prefaulter.committed(), 256);
  EXPECT_TRUE(resident(*storage, 250, 256));
}

TEST(KvPrefaulter, APoolSmallerThanTheReserveIsCommittedWhole) {
  auto storage = make_storage(8);
  KvPrefaulter prefaulter(*storage, /*idle_priority=*/false);
  EXPECT_EQ(prefaulter.reserve_blocks(), 8);
  prefaulter.ahead_of(0);
  prefaulter.wait_until_done();
  EXPECT_TRUE(resident(*storage, 0, 8));
}

TEST(KvPrefaulter, EveryRowAWriterStoresBesideItKeepsItsBytes) {
  // The writer fills blocks in order, moving the high water after each, while the prefaulter commits ahead of it
  // (and, where the writer overtakes it, over the same pages); then every row reads back what was stored.
  constexpr int32_t kBlocks = 96;
  auto storage = make_storage(kBlocks);
  KvPrefaulter prefaulter(*storage, /*idle_priority=*/false);
  std::vector<float> row(static_cast<size_t>(kShape.n_kv_heads) * kShape.head_dim);
  auto value = [](int32_t block, int32_t slot, int32_t layer, int kv) {
    return static_cast<float>((block * 16 + slot) % 1000) * 0.25f + static_cast<float>(layer * 2 + kv);
  };
  // Every (layer, K or V, slot) of a block, in the order the writer stores them.
  auto each_row = [&](auto&& fn) {
    for (int32_t layer = 0; layer < kShape.n_layers; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int32_t slot = 0; slot < 16; ++slot) fn(layer, kv, slot);
      }
    }
  };
  std::thread writer([&] {
    for (int32_t b = 0; b < kBlocks; ++b) {
      each_row([&](int32_t layer, int kv, int32_t slot) {
        std::fill(row.begin(), row.end(), value(b, slot, layer, kv));
        storage->store_row(layer, kv, BlockId{b}, slot, row.data());
      });
      prefaulter.ahead_of(b + 1);
    }
  });
  writer.join();
  prefaulter.wait_until_done();
  // The same rows stored with no prefaulter.
  auto reference = make_storage(kBlocks);
  for (int32_t b = 0; b < kBlocks; ++b) {
    each_row([&](int32_t layer, int kv, int32_t slot) {
      std::fill(row.begin(), row.end(), value(b, slot, layer, kv));
      reference->store_row(layer, kv, BlockId{b}, slot, row.data());
      for (int32_t h = 0; h < kShape.n_kv_heads; ++h) {
        ASSERT_EQ(std::memcmp(storage->head_slice(layer, kv, BlockId{b}, slot, h),
                              reference->head_slice(layer, kv, BlockId{b}, slot, h), kBlockBytes / 64),
                  0)
            << "block " << b << " layer " << layer << " kv " << kv << " slot " << slot << " head " << h;
      }
    });
  }
}

}  // namespace
}  // namespace hearth

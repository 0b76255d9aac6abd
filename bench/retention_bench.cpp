// Eviction cost of the block pool's retention queue against the pool size (Google Benchmark). Each iteration
// evicts one cached block (allocate), caches it under a new key at one of four priorities (a quarter with a TTL
// that has already run out by the next round) and releases it: the steady state of a full prefix cache. The
// cost per iteration must not grow with the number of blocks. Every block has its own parent key, so the prefix
// index's children lists stay short (one shared parent would make each eviction scan all its children).
//
//   build/bench/hearth-bench-retention [--benchmark_filter=...]

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "kv/block_pool.h"

namespace hearth {
namespace {

BlockHash key_of(uint64_t n) {
  BlockHash h;
  std::memcpy(h.bytes.data(), &n, sizeof n);
  return h;
}

void BM_EvictCacheRelease(benchmark::State& state) {
  const auto num_blocks = static_cast<int32_t>(state.range(0));
  int64_t now = 0;
  BlockPool pool(num_blocks, 16, [&now] { return now; });
  const std::vector<TokenId> tokens(16, TokenId{1});
  constexpr uint8_t kPriorities[] = {10, 50, 50, 90};
  uint64_t next_key = 1;
  auto fill = [&](BlockId b) {
    const uint64_t k = next_key++;
    (void)pool.cache(b, key_of(k), key_of(k | (uint64_t{1} << 62)), tokens);  // one child per parent
    pool.set_retention(b, kPriorities[k % 4], k % 4 == 3 ? now + 1 : kNoExpiry);
    pool.release(b);
  };
  std::vector<BlockId> all;
  for (int32_t i = 0; i < num_blocks; ++i) all.push_back(*pool.allocate());
  for (BlockId b : all) fill(b);
  for (auto _ : state) {
    ++now;
    const auto b = pool.allocate();
    benchmark::DoNotOptimize(b);
    fill(*b);
  }
  state.SetItemsProcessed(state.iterations());
  pool.check_invariants();
}
BENCHMARK(BM_EvictCacheRelease)->RangeMultiplier(16)->Range(1 << 10, 1 << 18);

// The queue alone (no prefix index, no hash maps): take the victim, re-queue it at one of four priorities, a
// quarter with an expiry when `with_ttl`.
void queue_cycle(benchmark::State& state, bool with_ttl) {
  const auto num_blocks = static_cast<int32_t>(state.range(0));
  RetentionQueue queue(num_blocks);
  constexpr uint8_t kPriorities[] = {10, 50, 50, 90};
  int64_t now = 0;
  uint64_t k = 0;
  for (int32_t i = 0; i < num_blocks; ++i, ++k) queue.push(i, true, kPriorities[k % 4], kNoExpiry, now);
  for (auto _ : state) {
    ++now;
    queue.expire(now);
    const int32_t i = *queue.victim();
    queue.remove(i);
    ++k;
    queue.push(i, true, kPriorities[k % 4], with_ttl && k % 4 == 3 ? now + 1 : kNoExpiry, now);
  }
  state.SetItemsProcessed(state.iterations());
  queue.check_invariants();
}
void BM_QueueCycle(benchmark::State& state) {
  queue_cycle(state, false);
}
void BM_QueueCycleWithTtl(benchmark::State& state) {
  queue_cycle(state, true);
}
BENCHMARK(BM_QueueCycle)->RangeMultiplier(16)->Range(1 << 10, 1 << 18);
BENCHMARK(BM_QueueCycleWithTtl)->RangeMultiplier(16)->Range(1 << 10, 1 << 18);

}  // namespace
}  // namespace hearth

BENCHMARK_MAIN();

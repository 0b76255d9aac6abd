// Thousands of random operations against a reference model of the cache. A fake K/V store records which
// (token, position) each slot holds, so any reuse of wrong data is caught, not just bad bookkeeping. With window
// slabs a second fake store stands for the sliding-window layers: every written position must have a slab, and
// what a reused prefix's next token reads there must be the right data too.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace hearth {
namespace {

constexpr int32_t kBlockSize = 4;
constexpr int32_t kWindow = 6;  // with window slabs

struct SlotValue {
  int32_t token = -1;
  int32_t pos = -1;
  bool operator==(const SlotValue&) const = default;
};

struct Live {
  std::vector<TokenId> tokens;
  int32_t num_computed = 0;
  int salt = 0;
};

class RandomCacheTest {
 public:
  RandomCacheTest(int32_t num_blocks, uint32_t seed, int32_t num_window_slabs = 0)
      : kv_({.num_blocks = num_blocks,
             .block_size = kBlockSize,
             .max_pinned_blocks = num_blocks / 4,
             .clock = [this] { return now_ms_; },
             .window_tokens = num_window_slabs > 0 ? kWindow : 0,
             .num_window_slabs = num_window_slabs}),
        store_(num_blocks, std::vector<SlotValue>(kBlockSize)),
        slab_store_(num_window_slabs, std::vector<SlotValue>(kBlockSize)),
        rng_(seed),
        big_pool_(num_blocks >= 8192) {
    for (int s = 0; s < 2; ++s) ns_.push_back(CacheNamespace{.model_fingerprint = "m", .cache_salt = s ? "x" : ""}.digest());
    for (int stem = 0; stem < 3; ++stem) {
      std::vector<TokenId> t;
      const int n = 5 + stem * 7;
      for (int i = 0; i < n; ++i) t.push_back(TokenId{stem * 100 + i});
      stems_.push_back(t);
    }
  }

  void run(int n_ops) {
    for (int op = 0; op < n_ops; ++op) {
      now_ms_ += static_cast<int64_t>(rng_() % 3);  // retention TTLs run out as the operations go by
      const int choice = static_cast<int>(rng_() % 100);
      if (choice < 40) new_request();
      else if (choice < 70) extend();
      else if (choice < 90) finish();
      else pin_or_unpin();
      if (!big_pool_ || op % 25 == 0) kv_.check_invariants();  // the big pool's O(n) check every op is slow

    }
    for (auto& [id, live] : live_) kv_.release(RequestId{id});
    live_.clear();
    for (const auto& key : pins_) ASSERT_TRUE(kv_.unpin(key));
    pins_.clear();
    kv_.check_invariants();
    ASSERT_EQ(kv_.pool().num_blocks_free(), kv_.pool().num_blocks_total()) << "leaked blocks";
    ASSERT_EQ(kv_.pool().num_window_slabs_in_use(), 0) << "leaked window slabs";
  }

 private:
  std::vector<TokenId> random_prompt() {
    std::vector<TokenId> t = stems_[rng_() % stems_.size()];
    if (rng_() % 2) t.resize(1 + rng_() % t.size());  // sometimes only part of a stem
    const int extra = static_cast<int>(rng_() % 9);
    for (int i = 0; i < extra; ++i) t.push_back(TokenId{1000 + static_cast<int32_t>(rng_() % 5)});
    return t;
  }

  // Tokens of previous sequences whose K/V was computed, for the no-eviction reference.
  int32_t expected_hit(const std::vector<TokenId>& prompt, int salt) const {
    int32_t best = 0;
    for (const auto& [tokens, s] : history_) {
      if (s != salt) continue;
      const auto lcp = static_cast<int32_t>(
          std::mismatch(prompt.begin(), prompt.end(), tokens.begin(), tokens.end()).first - prompt.begin());
      const auto full = static_cast<int32_t>(tokens.size()) / kBlockSize * kBlockSize;
      best = std::max(best, std::min(lcp, full));
    }
    return std::min(best, static_cast<int32_t>(prompt.size()) - 1);
  }

  void compute(uint64_t id, Live& live, int32_t upto) {
    auto table = kv_.block_table(RequestId{id});
    const auto slabs = kv_.window_table(RequestId{id});
    for (int32_t p = live.num_computed; p < upto; ++p) {
      store_[table[p / kBlockSize].value][p % kBlockSize] = {live.tokens[p].value, p};
      if (slab_store_.empty()) continue;
      ASSERT_GE(slabs[p / kBlockSize].value, 0) << "request " << id << " writes position " << p << " without a slab";
      slab_store_[slabs[p / kBlockSize].value][p % kBlockSize] = {live.tokens[p].value, p};
    }
    live.num_computed = upto;
    kv_.cache_full_blocks(RequestId{id}, live.tokens, upto);
    history_.push_back({std::vector<TokenId>(live.tokens.begin(), live.tokens.begin() + upto), live.salt});
  }

  void verify_prefix(uint64_t id, const Live& live, int32_t n) {
    auto table = kv_.block_table(RequestId{id});
    for (int32_t p = 0; p < n; ++p) {
      ASSERT_EQ(store_[table[p / kBlockSize].value][p % kBlockSize], (SlotValue{live.tokens[p].value, p}))
          << "request " << id << " reused wrong K/V at position " << p;
    }
    if (slab_store_.empty()) return;
    const auto slabs = kv_.window_table(RequestId{id});
    for (int32_t p = std::max(0, n - kWindow + 1); p < n; ++p) {  // what the next token reads on those layers
      ASSERT_GE(slabs[p / kBlockSize].value, 0) << "request " << id << " holds no slab for position " << p;
      ASSERT_EQ(slab_store_[slabs[p / kBlockSize].value][p % kBlockSize], (SlotValue{live.tokens[p].value, p}))
          << "request " << id << " reused wrong window K/V at position " << p;
    }
  }

  void new_request() {
    Live live{random_prompt(), 0, static_cast<int>(rng_() % 2)};
    const uint64_t id = next_id_++;
    const auto n = static_cast<int32_t>(live.tokens.size());
    const int32_t expected = expected_hit(live.tokens, live.salt);
    // Half the requests ask for retention of a random prefix: a random priority, sometimes with a short TTL.
    std::vector<RetentionSpan> retention;
    if (rng_() % 2) {
      retention.push_back({static_cast<int32_t>(1 + rng_() % n), static_cast<uint8_t>(rng_() % 101),
                           rng_() % 2 ? static_cast<int64_t>(1 + rng_() % 50) : 0});
    }
    auto admitted = kv_.admit(RequestId{id}, ns_[live.salt], live.tokens, n, true, retention);
    if (!admitted) return;  // no room now: the scheduler would wait
    if (big_pool_) {
      ASSERT_EQ(kv_.pool().num_evictions(), 0u) << "the big pool must never evict";
      ASSERT_EQ(admitted->num_cached_tokens, expected);
    }
    ASSERT_LE(admitted->num_cached_tokens, expected);
    for (const BlockCopy& c : kv_.pending_copies()) {
      std::copy_n(store_[c.src.value].begin(), c.n_slots, store_[c.dst.value].begin());
      if (slab_store_.empty()) continue;
      ASSERT_TRUE(c.src_slab.value >= 0 && c.dst_slab.value >= 0) << "a copy without window slabs";
      std::copy_n(slab_store_[c.src_slab.value].begin(), c.n_slots, slab_store_[c.dst_slab.value].begin());
    }
    kv_.complete_copies();
    live.num_computed = admitted->num_cached_tokens;
    verify_prefix(id, live, live.num_computed);
    compute(id, live, n);
    live_.emplace(id, std::move(live));
  }

  void extend() {
    if (live_.empty()) return;
    auto it = std::next(live_.begin(), static_cast<long>(rng_() % live_.size()));
    Live& live = it->second;
    const int extra = 1 + static_cast<int>(rng_() % 6);
    const auto total = static_cast<int32_t>(live.tokens.size()) + extra;
    if (!kv_.allocate_slots(RequestId{it->first}, total)) return;
    for (int i = 0; i < extra; ++i) live.tokens.push_back(TokenId{2000 + static_cast<int32_t>(rng_() % 3)});
    compute(it->first, live, total);
  }

  void finish() {
    if (live_.empty()) return;
    auto it = std::next(live_.begin(), static_cast<long>(rng_() % live_.size()));
    verify_prefix(it->first, it->second, it->second.num_computed);
    kv_.release(RequestId{it->first});
    live_.erase(it);
  }

  void pin_or_unpin() {
    if (!pins_.empty() && rng_() % 2) {
      ASSERT_TRUE(kv_.unpin(pins_.back()));
      pins_.pop_back();
      return;
    }
    const auto& stem = stems_[rng_() % stems_.size()];
    auto pin = kv_.pin_prefix(ns_[0], stem);
    if (pin.ok() && std::find(pins_.begin(), pins_.end(), pin->key) == pins_.end()) pins_.push_back(pin->key);
  }

  int64_t now_ms_ = 0;
  KvCacheManager kv_;
  std::vector<std::vector<SlotValue>> store_;
  std::vector<std::vector<SlotValue>> slab_store_;  // by window slab id
  std::mt19937 rng_;
  bool big_pool_;
  std::vector<BlockHash> ns_;
  std::vector<std::vector<TokenId>> stems_;
  std::map<uint64_t, Live> live_;
  std::vector<std::pair<std::vector<TokenId>, int>> history_;
  std::vector<BlockHash> pins_;
  uint64_t next_id_ = 1;
};

TEST(KvRandom, TightPoolUnderEvictionPressure) {
  for (uint32_t seed = 1; seed <= 4; ++seed) RandomCacheTest(24, seed).run(3000);
}

// 10 window slabs for 24 blocks: slabs are evicted far more often than blocks, so hits are cut back at windows.
TEST(KvRandom, WindowSlabsUnderEvictionPressure) {
  for (uint32_t seed = 1; seed <= 4; ++seed) RandomCacheTest(24, seed, 10).run(3000);
}

TEST(KvRandom, BigPoolReusesExactlyTheLongestComputedPrefix) {
  for (uint32_t seed = 1; seed <= 2; ++seed) RandomCacheTest(8192, seed).run(1000);
}

}  // namespace
}  // namespace hearth

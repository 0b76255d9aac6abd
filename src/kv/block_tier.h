#pragma once
// BlockTier: what the engine needs of a tier below its block pool (the disk tier, kv/disk_tier.h; the Redis tier,
// kv/redis_tier.h). Entries are kv/tier_entry.h's (through kv/tier_codec.h), named by version-stable block keys.
// Every call returns at once: a tier does its I/O on its own threads behind bounded queues, and a tier that is slow,
// full, down or returns garbage only makes loads come back short (the caller recomputes).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "kv/tier_codec.h"
#include "kv/tier_entry.h"

namespace hearth {

struct TierLoadDone {
  uint64_t job = 0;
  std::vector<TierBlock> blocks;  // the leading keys of the job that loaded and verified, in the order asked
  double seconds = 0;             // from load() to completion
};

// A queued read of a tier (BlockTier::load), for the tier's reader thread.
struct TierLoadJob {
  uint64_t id;
  uint64_t owner;
  std::vector<BlockHash> keys;
  std::string layout;
  std::chrono::steady_clock::time_point queued;
};

// A tier's finished loads, kept by owner until taken; guarded by the tier's own mutex (every call holds it).
class TierLoadResults {
 public:
  void add(uint64_t owner, TierLoadDone done) { done_.emplace_back(owner, std::move(done)); }
  // Removes and returns `owner`'s finished loads, in the order they finished.
  std::vector<TierLoadDone> take(uint64_t owner) {
    std::vector<TierLoadDone> out;
    for (auto it = done_.begin(); it != done_.end();) {
      if (it->first == owner) {
        out.push_back(std::move(it->second));
        it = done_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  bool has(uint64_t owner) const {
    return std::any_of(done_.begin(), done_.end(), [&](const auto& d) { return d.first == owner; });
  }

 private:
  std::vector<std::pair<uint64_t, TierLoadDone>> done_;  // (owner, result)
};

class BlockTier {
 public:
  virtual ~BlockTier() = default;

  // Whether the tier holds (or is known to hold) the block of `key`. A hint: a load may still come back short.
  virtual bool contains(const BlockHash& key) const = 0;
  // Queues a write of one block; `model` names its model for those watching the tier (may be empty). Returns false
  // (counted as dropped) when the queue is full or the entry too large.
  virtual bool write(TierEntryHeader header, std::vector<uint8_t> payload, std::string_view model) = 0;
  // Queues a read of `keys` (a chain, first block first) whose payloads must have `layout`, for `owner` (any id that
  // tells the tier's users apart: several engines may share one tier). The verified leading blocks arrive through
  // take_loaded(owner). Returns the job id.
  virtual uint64_t load(std::vector<BlockHash> keys, std::string layout, uint64_t owner) = 0;
  virtual std::vector<TierLoadDone> take_loaded(uint64_t owner) = 0;
  // Waits until a load of `owner` is done or `deadline` passes; true when take_loaded(owner) has something.
  virtual bool wait_loaded(std::chrono::steady_clock::time_point deadline, uint64_t owner) = 0;
  // Changes an entry's retention, where the tier keeps one.
  virtual void set_retention(const BlockHash& key, const TierRetention& retention) = 0;
  // Measured seconds per block of finished loads (queueing included); 0 until measured.
  virtual double seconds_per_block() const = 0;
};

}  // namespace hearth

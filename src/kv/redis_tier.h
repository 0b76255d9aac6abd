#pragma once
// RedisTier: a KV tier that several Hearth servers share, below each one's RAM and disk tiers (hearth serve
// --kv-redis URL; docs/cluster.md "The Redis tier").
//
//   value    exactly the disk tier's entry (kv/tier_codec.h: plain, or sealed with --kv-disk-key's key), so every
//            load is verified the same way (checksum, key against its tokens, layout); a corrupt, truncated or
//            foreign value is counted, DELeted and never loaded
//   key      "hearth:kv:<name>": the block key in hex, or its HMAC under the key when sealed. The block key holds
//            the model fingerprint, KV format and salt namespace, so one Redis serves several models and tenants
//            without mixing them
//   TTL      SET ... PX from the entry's retention expiry, else the default TTL (--kv-redis-ttl, 24 h)
//   events   every write and every removal this server knows of is XADDed to the stream "hearth:kv-events"
//            (MAXLEN ~ 100000; fields event, key, ns, model, tier, server), and each server reads the stream
//            (XREAD BLOCK on its own connection and thread) to learn what the others stored
//
// Knowing what Redis holds without a round trip per request: a bounded set of names known to be there (this
// server's writes and the stream's "stored" events, less its "removed" ones and the loads that found nothing),
// least recently used first out. contains() answers from it; load() pipelines the chain's GETs in one round trip.
//
// A reconnect that finds another Redis process (INFO's run_id: a restart, maybe empty) forgets every known name.
//
// Threads and faults: a writer, a reader and an event reader, each with its own connection (connect and command
// timeouts of a few hundred ms; after a failure it reconnects with a doubling backoff). write() and load() only
// queue (bounded by bytes and jobs) and never block; a write that finds the queue full or Redis down is dropped
// (counted), a load that finds Redis down, slow or short comes back with the blocks it verified (possibly none):
// the request recomputes. Values are read with GETRANGE up to max_value_bytes, so a huge value never fills memory.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/block_tier.h"
#include "kv/tier_codec.h"
#include "util/result.h"

namespace hearth {

// redis://[user:password@]host[:port][/db] (a password alone: redis://:password@host).
struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // empty: AUTH with the password alone (the default user)
  std::string password;  // empty: no AUTH
  int db = 0;
};
// Refuses rediss:// (Debian's hiredis 0.14 has no TLS) and anything malformed, with a message naming the problem.
[[nodiscard]] Result<RedisUrl> parse_redis_url(std::string_view url);

inline constexpr std::string_view kRedisKeyPrefix = "hearth:kv:";
inline constexpr std::string_view kRedisEventStream = "hearth:kv-events";

struct RedisTierConfig {
  RedisUrl url;
  std::shared_ptr<const TierKey> seal_key;  // seals every entry (kv/tier_seal.h); null: plain entries
  int64_t default_ttl_ms = 24ll * 3600 * 1000;
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds command_timeout{300};
  std::chrono::milliseconds max_backoff{5000};
  int64_t max_queued_write_bytes = 64ll << 20;  // payload bytes waiting to be written; beyond this writes drop
  int64_t max_value_bytes = 256ll << 20;        // larger entries are neither written nor read
  size_t max_queued_loads = 256;                // beyond this a load comes back empty at once
  size_t max_known_keys = 1 << 20;              // names remembered as held by Redis
  int64_t stream_max_len = 100000;              // XADD MAXLEN ~
  std::string server_id;                        // the events' "server" field (hostname:port)
};

struct RedisTierStats {
  bool connected = false;  // the last command on any of the tier's connections succeeded
  int64_t num_known_keys = 0;
  int64_t num_queued_writes = 0;
  uint64_t num_loaded_blocks = 0;  // verified blocks read back
  uint64_t num_loaded_bytes = 0;
  double load_seconds = 0;
  uint64_t num_writes = 0;  // SETs Redis accepted
  uint64_t num_written_bytes = 0;
  uint64_t num_writes_dropped = 0;        // queue full, too large, expired, or Redis down
  uint64_t num_loads_dropped = 0;         // load queue full
  uint64_t num_errors = 0;                // connection failures and error replies (OOM, NOAUTH, ...)
  uint64_t num_timeouts = 0;              // commands past the command timeout
  uint64_t num_corrupt_removed = 0;       // values that failed verification and were DELeted
  uint64_t num_key_mismatch_removed = 0;  // of those: sealed with another key, or not sealed as the setting asks
  uint64_t num_missing = 0;               // known names whose value was gone (expired, evicted, a restart)
  uint64_t num_events_published = 0;
  uint64_t num_events_read = 0;
  uint64_t num_reconnects = 0;     // connections (re)established after the first
  uint64_t num_restarts_seen = 0;  // reconnects that found another Redis process (its run_id): known names forgotten
};

class RedisTier final : public BlockTier {
 public:
  // Starts the tier's threads; never fails for a Redis that is down (it connects when it can).
  [[nodiscard]] static std::unique_ptr<RedisTier> open(const RedisTierConfig& config);
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;
  ~RedisTier() override;  // tries the queued writes (within the timeouts), then stops the threads

  bool contains(const BlockHash& key) const override;
  // Skips (true) a block known to be held; drops (false, counted) a write past the queue's bytes, larger than
  // max_value_bytes, or already expired.
  bool write(TierEntryHeader header, std::vector<uint8_t> payload, std::string_view model) override;
  uint64_t load(std::vector<BlockHash> keys, std::string layout, uint64_t owner) override;
  std::vector<TierLoadDone> take_loaded(uint64_t owner) override;
  bool wait_loaded(std::chrono::steady_clock::time_point deadline, uint64_t owner) override;
  // Redis keeps no eviction order of Hearth's: a later retention changes nothing there (the TTL stays).
  void set_retention(const BlockHash&, const TierRetention&) override {}
  double seconds_per_block() const override;

  RedisTierStats stats() const;
  const RedisTierConfig& config() const { return config_; }
  // The Redis key of block `key`.
  std::string redis_key(const BlockHash& key) const;

  // Blocks until every queued write was tried (tests; shutdown).
  void flush();
  // Waits until `n` names are known (this tier's writes, and events read from the stream) or `deadline` passes.
  bool wait_num_known(size_t n, std::chrono::steady_clock::time_point deadline) const;

 private:
  struct Connection;
  struct WriteJob {
    TierEntryHeader header;
    std::vector<uint8_t> payload;
    std::string model;
  };

  explicit RedisTier(const RedisTierConfig& config);
  void writer_main();
  void reader_main();
  void events_main();
  void write_batch(Connection& c, std::vector<WriteJob> jobs);
  TierLoadDone do_load(Connection& c, const TierLoadJob& job);
  // Connects `c` when it is down and its backoff has passed (AUTH, SELECT, timeouts). False while down.
  bool ensure_connected(Connection& c, std::chrono::milliseconds timeout);
  // Drops `c` after a failure (counted as a timeout or an error) and doubles its backoff.
  void drop(Connection& c, bool timed_out);
  // Appends one "stored"/"removed" XADD to `c`'s pipeline.
  void append_event(Connection& c, std::string_view event, const std::string& name, const BlockHash& ns,
                    std::string_view model);
  // Publishes "removed" for these names on `c` (one round trip).
  void publish_removed(Connection& c, const std::vector<std::string>& names);
  // Applies one event read from the stream.
  void apply_event(std::string_view event, std::string_view name, std::string_view tier);
  // The known-name set; require mutex_ held.
  void known_insert(const BlockHash& name);
  void known_erase(const BlockHash& name);

  RedisTierConfig config_;
  TierCodec codec_;

  mutable std::mutex mutex_;
  std::condition_variable work_;       // the writer's
  std::condition_variable read_work_;  // the reader's
  mutable std::condition_variable done_;
  std::condition_variable stop_;      // wakes the threads' backoff waits at shutdown
  std::list<BlockHash> known_order_;  // most recently used first
  std::unordered_map<BlockHash, std::list<BlockHash>::iterator> known_;
  std::deque<WriteJob> writes_;
  std::deque<TierLoadJob> loads_;
  TierLoadResults loaded_;
  int64_t queued_write_bytes_ = 0;
  size_t num_writes_in_flight_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  uint64_t next_job_ = 1;
  double seconds_per_block_ = 0;
  RedisTierStats stats_;
  std::string run_id_;        // of the Redis process the known names belong to
  uint64_t redis_epoch_ = 0;  // bumped when run_id_ changes
  std::atomic<bool> connected_{false};
  std::thread writer_;
  std::thread reader_;
  std::thread events_;
};

}  // namespace hearth

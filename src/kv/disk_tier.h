#pragma once
// DiskTier: the prefix cache's persistent tier. One file per KV block (kv/tier_entry.h), named by the block's
// version-stable key, under a directory that survives restarts:
//
//   DIR/v1/lock                 flock: one Hearth process owns the directory
//   DIR/v1/tmp/                 entries being written (removed at open: a crash leaves only these behind)
//   DIR/v1/ab/abcdef….kvb       one entry; "ab" is the name's first byte in hex
//
// With a key (hearth serve --kv-disk-key) every entry is sealed (kv/tier_seal.h: AES-256-GCM, tokens, block keys and
// K/V inside the ciphertext) and named by an HMAC of its block key; without one, plain and named by the block key.
// An entry that does not match the setting (another key, sealed without a key, plain with one) is foreign: counted
// (num_key_mismatch_removed, within num_corrupt_removed), deleted, never loaded, as any corrupt entry is.
//
// Privacy: directories are created 0700 and files 0600 (at creation, so no other local user ever sees them open);
// looser modes found at open() are counted and warned of, never changed behind the operator's back. Only regular
// files are ever opened (O_NONBLOCK|O_NOFOLLOW, then fstat): a FIFO, socket, device or link named *.kvb is skipped
// and counted, so none can block startup or lead the tier outside its directory.
//
// Writes are crash-safe: temporary files, syncfs, renames, then the directories are fsynced. SIGKILL at any moment
// leaves complete entries or temporaries, never a half-written entry under a final name. The index (key → size,
// last use, hits, retention) lives in memory and is rebuilt at open() from the entries' headers; every load reads
// the whole entry and verifies it (checksum, key against its tokens, layout), so a corrupt, truncated or foreign
// file is counted, deleted and never reaches attention.
//
// The byte budget is hard: before a write, entries are evicted lowest retention priority first (an expired entry
// counts as priority 0), never-hit before hit, least recently used first, deeper blocks of a chain before their
// parents. All file I/O runs on the tier's own threads behind bounded queues (a writer, which makes a burst of
// entries durable with one syncfs, and a reader, so a load never waits behind a flush): write() and load() never
// block on the disk, and a full queue drops the write (counted) rather than stall the caller.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_tier.h"
#include "kv/tier_codec.h"
#include "kv/tier_entry.h"
#include "kv/tier_seal.h"
#include "util/result.h"

namespace hearth {

struct DiskTierConfig {
  std::filesystem::path dir;
  int64_t capacity_bytes = 0;                  // hard cap on the entries' bytes (each rounded up to 4 KiB)
  int64_t max_queued_write_bytes = 64ll << 20;  // payload bytes waiting to be written; beyond this writes drop
  std::shared_ptr<const TierKey> seal_key;      // seals every entry (kv/tier_seal.h); null: plain entries
};

struct DiskTierStats {
  int64_t capacity_bytes = 0;
  int64_t bytes_used = 0;  // entries on disk plus writes in progress
  int64_t num_entries = 0;
  int64_t num_queued_writes = 0;  // waiting or being written: 0 only when every accepted write is durable
  uint64_t num_loaded_blocks = 0;  // hits: blocks read back and verified
  uint64_t num_loaded_bytes = 0;
  double load_seconds = 0;  // time spent reading and verifying entries
  uint64_t num_writes = 0;
  uint64_t num_written_bytes = 0;
  uint64_t num_writes_dropped = 0;  // queue full or larger than the whole budget
  uint64_t num_write_errors = 0;    // the filesystem refused (full, read-only, ...)
  uint64_t num_evictions = 0;
  uint64_t num_corrupt_removed = 0;  // failed verification (at open or at load) and were deleted
  uint64_t num_key_mismatch_removed = 0;  // of those: another key sealed them, or they are plain with a key set, or
                                          // sealed without one
  uint64_t num_missing = 0;          // indexed, but the file was gone when loaded
  uint64_t num_irregular_skipped = 0;  // *.kvb names that are not regular files (FIFO, socket, device, link): left alone
  uint64_t num_loose_modes = 0;        // tier directories and entries other users may read (found at open; a warning)
};

// What the index knows of one entry (listings, tests).
struct TierEntryInfo {
  BlockHash key;
  BlockHash parent_key;
  BlockHash ns;
  int32_t depth = 0;
  std::vector<TokenId> tokens;
  TierRetention retention;
  int64_t last_used_ms = 0;
  uint32_t hits = 0;
  int64_t bytes = 0;
};

class DiskTier final : public BlockTier {
 public:
  // Creates the directory layout, takes the lock (fails when another process holds it), removes temporaries and
  // indexes the entries, deleting those whose header is unreadable.
  [[nodiscard]] static Result<std::unique_ptr<DiskTier>> open(const DiskTierConfig& config);
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;
  ~DiskTier() override;  // finishes the queued writes, then stops the thread

  const std::filesystem::path& dir() const { return config_.dir; }
  int64_t capacity_bytes() const { return config_.capacity_bytes; }
  // Entries the header scan at open() removed as corrupt or foreign.
  uint64_t num_removed_at_open() const { return removed_at_open_; }

  bool contains(const BlockHash& key) const override;

  // Queues a write of one block. Returns false (counted as dropped) when the queue is full or the entry is larger than
  // the budget; an entry whose key is already stored is only touched.
  bool write(TierEntryHeader header, std::vector<uint8_t> payload, std::string_view model = {}) override;

  // Queues a read of `keys` (a chain, first block first) whose payloads must have `layout`, for `owner` (any id
  // that tells the tier's users apart, e.g. one per engine: several models may share one tier). The result (the
  // verified leading blocks) arrives through take_loaded(owner). Returns the job id.
  uint64_t load(std::vector<BlockHash> keys, std::string layout, uint64_t owner = 0) override;
  std::vector<TierLoadDone> take_loaded(uint64_t owner = 0) override;
  // Waits until a load of `owner` is done or `deadline` passes; true when take_loaded(owner) has something.
  bool wait_loaded(std::chrono::steady_clock::time_point deadline, uint64_t owner = 0) override;

  // Changes an entry's retention: in memory at once, in its file (in place) on the writer thread.
  void set_retention(const BlockHash& key, const TierRetention& retention) override;

  // Measured seconds per block of finished loads (an exponential average, queueing included); 0 until measured.
  double seconds_per_block() const override;

  DiskTierStats stats() const;
  // Entries of namespace `ns`, most recently used first, at most `max`.
  std::vector<TierEntryInfo> entries(const BlockHash& ns, size_t max) const;

  // Blocks until every queued write is on disk (tests; shutdown).
  void flush();

 private:
  struct Entry {
    TierEntryInfo info;
    int64_t file_bytes = 0;
  };
  struct EvictOrder {
    uint8_t priority;
    uint8_t hit;
    int64_t last_used_ms;
    int32_t neg_depth;
    BlockHash key;
    auto operator<=>(const EvictOrder&) const = default;
  };
  struct WriteJob {
    TierEntryHeader header;
    std::vector<uint8_t> payload;
  };

  explicit DiskTier(const DiskTierConfig& config);
  void scan();
  // Counts (and warns of) tier directories not 0700 and entries not 0600, which other local users may read.
  void check_private_modes();
  void writer_main();
  void reader_main();
  // Writes a batch: each entry to a temporary file, one syncfs for all, then the renames and directory fsyncs.
  void write_batch(std::vector<WriteJob> jobs);
  void do_load(TierLoadJob job);
  void write_retention(const BlockHash& key, const TierRetention& retention);
  // Reads and verifies one indexed entry; on failure deletes it (counted). Requires mutex_ not held.
  std::optional<TierBlock> read_entry(const BlockHash& key, const std::string& layout);
  std::filesystem::path entry_path(const BlockHash& key) const;
  // The entry's file name without extension: the block key in hex, or its HMAC under the key (kv/tier_seal.h).
  std::string entry_name(const BlockHash& key) const { return codec_.entry_name(key); }
  // Index maintenance; require mutex_ held.
  EvictOrder evict_order(const Entry& e, int64_t now_ms) const;
  void index_insert(Entry e);
  void index_erase(const BlockHash& key);
  void index_touch(const BlockHash& key, int64_t now_ms);
  // Evicts the first entry in eviction order; its file is unlinked now, or added to *doomed for the caller to unlink
  // after releasing the lock.
  bool evict_one(std::vector<std::filesystem::path>* doomed = nullptr);

  DiskTierConfig config_;
  TierCodec codec_;  // the entry format the setting asks for: sealed with config_.seal_key, else plain
  int lock_fd_ = -1;
  uint64_t removed_at_open_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable work_;       // the writer's
  std::condition_variable read_work_;  // the reader's
  std::condition_variable done_;
  std::unordered_map<BlockHash, Entry> index_;
  std::set<EvictOrder> evict_;  // eviction order, first is evicted first
  std::unordered_map<BlockHash, EvictOrder> evict_key_;
  std::deque<WriteJob> writes_;
  std::deque<TierLoadJob> loads_;
  std::vector<std::pair<BlockHash, TierRetention>> retention_updates_;  // for the writer thread
  TierLoadResults loaded_;
  int64_t queued_write_bytes_ = 0;
  size_t num_writes_in_flight_ = 0;  // the writer's current batch
  bool writing_ = false;
  bool stopping_ = false;
  uint64_t next_job_ = 1;
  uint64_t next_tmp_ = 1;
  double seconds_per_block_ = 0;
  DiskTierStats stats_;
  std::thread writer_;
  std::thread reader_;
};

// The default directory: $XDG_CACHE_HOME/hearth/kv-cache, else $HOME/.cache/hearth/kv-cache.
std::filesystem::path default_disk_tier_dir();
// The default budget: a tenth of the free space where `dir` lives, at most 64 GiB, at least 256 MiB (or what is free).
int64_t default_disk_tier_bytes(const std::filesystem::path& dir);

}  // namespace hearth

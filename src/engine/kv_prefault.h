#pragma once
// KvPrefaulter: commits the KV pool's pages just ahead of the blocks requests have used, on a thread of its own at
// idle priority (SCHED_IDLE: it runs only on a core nothing else wants), so a request's new blocks land on pages
// the kernel has already zeroed instead of faulting them in, one 2 MiB page at a time, in the middle of its
// prefill.
//
// The pool hands out never-used blocks in id order (BlockPool::high_water), so "ahead" is the next `reserve`
// blocks past the highest one handed out. The reserve is one 2 MiB page of every plane (at least one block), so
// the process holds at most one such page per layer's K and V beyond what the pool's 2 MiB steps already round up
// to (kv_storage.h). Committing changes no byte (KvStorage::commit_blocks), so it may race the engine's own
// writes: results never depend on it, only when the page faults are paid.
//
// Why: a later turn otherwise spends part of its prefill zeroing fresh 2 MiB pages for its K/V rows
// (docs/performance-log.md, "Latest: the KV pool committed ahead of use").

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace hearth {

class KvStorage;

class KvPrefaulter {
 public:
  // idle_priority false keeps the thread at normal priority (tests, where a loaded machine could leave an idle
  // thread waiting for seconds).
  explicit KvPrefaulter(KvStorage& storage, bool idle_priority = true);
  ~KvPrefaulter();
  KvPrefaulter(const KvPrefaulter&) = delete;
  KvPrefaulter& operator=(const KvPrefaulter&) = delete;

  // The pool has handed out blocks below high_water (BlockPool::high_water): commit through high_water + reserve.
  // Never blocks.
  void ahead_of(int32_t high_water);

  int32_t reserve_blocks() const { return reserve_; }
  // Blocks below this are committed or were handed out before the thread got to them.
  int32_t committed() const;
  // Waits until everything asked for so far is committed (tests).
  void wait_until_done() const;

 private:
  void run(bool idle_priority);

  KvStorage& storage_;
  int32_t reserve_;
  int32_t chunk_;  // blocks per commit call, so the thread takes its locks in short spells
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  int32_t next_ = 0;    // guarded by mutex_: the first block not yet committed
  int32_t wanted_ = 0;  // guarded by mutex_: commit every block below it
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth

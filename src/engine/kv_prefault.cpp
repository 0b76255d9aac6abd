#include "engine/kv_prefault.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "model/kv_storage.h"
#include "util/huge_pages.h"  // kHugePageBytes

namespace hearth {
namespace {

// Blocks in one 2 MiB page of the plane whose blocks are smallest (so every plane gets at least that much ahead).
int32_t blocks_per_huge_page(const KvStorage& storage) {
  const size_t smallest = std::min(storage.row_bytes(0), storage.row_bytes(1)) * storage.block_size();
  const auto blocks = static_cast<int32_t>((kHugePageBytes + smallest - 1) / std::max<size_t>(smallest, 1));
  return std::clamp(blocks, 1, storage.num_blocks());
}

}  // namespace

KvPrefaulter::KvPrefaulter(KvStorage& storage, bool idle_priority)
    : storage_(storage),
      reserve_(blocks_per_huge_page(storage)),
      chunk_(std::max(1, reserve_ / 4)),
      thread_([this, idle_priority] { run(idle_priority); }) {}

KvPrefaulter::~KvPrefaulter() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void KvPrefaulter::ahead_of(int32_t high_water) {
  {
    const std::lock_guard lock(mutex_);
    const int32_t want = std::min(storage_.num_blocks(), std::max(0, high_water) + reserve_);
    // Blocks already handed out were written by the engine (and so committed); the thread skips them.
    next_ = std::max(next_, std::min(high_water, want));
    if (want <= wanted_) return;
    wanted_ = want;
  }
  changed_.notify_all();
}

int32_t KvPrefaulter::committed() const {
  const std::lock_guard lock(mutex_);
  return next_;
}

void KvPrefaulter::wait_until_done() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return next_ >= wanted_ || stop_; });
}

void KvPrefaulter::run(bool idle_priority) {
  if (idle_priority) {
    const sched_param param{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);  // best effort: normal priority otherwise
  }
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stop_ || next_ < wanted_; });
    if (stop_) return;
    const int32_t begin = next_;
    const int32_t end = std::min(wanted_, begin + chunk_);
    lock.unlock();
    storage_.commit_blocks(begin, end);
    lock.lock();
    next_ = std::max(next_, end);
    changed_.notify_all();
  }
}

}  // namespace hearth

#include "util/thread_pool.h"

#include <immintrin.h>

namespace hearth {
namespace {
// Workers spin this many polls before sleeping: decode steps arrive back to back, and waking a sleeping
// thread costs tens of microseconds.
constexpr int kSpinPolls = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::dispatch(Trampoline call, void* ctx) {
  if (num_threads_ == 1) {
    call(ctx, 0, 1);
    return;
  }
  take_turn();
  {
    std::lock_guard lock(mutex_);
    call_.store(call, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    pending_.store(num_threads_ - 1, std::memory_order_relaxed);
    next_part_.store(1, std::memory_order_release);  // publishes call_, ctx_, pending_ to whoever claims a part
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  call(ctx, 0, num_threads_);
  // The caller helps: a worker that is not running yet (an oversubscribed machine) leaves its part to whoever
  // is free, instead of the whole pool waiting for the scheduler to give it a core.
  run_parts();
  const auto waiting = std::chrono::steady_clock::now();
  // Spin briefly (workers usually finish together), then yield so an oversubscribed machine still progresses.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kSpinPolls) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  const auto waited = std::chrono::steady_clock::now() - waiting;
  const auto ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count());
  calls_.fetch_add(1, std::memory_order_relaxed);
  wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  if (waited > PoolWaits::kLongWait) {
    long_waits_.fetch_add(1, std::memory_order_relaxed);
    long_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  end_turn();
}

PoolWaits ThreadPool::waits() const {
  return {calls_.load(std::memory_order_relaxed), wait_ns_.load(std::memory_order_relaxed),
          long_waits_.load(std::memory_order_relaxed), long_wait_ns_.load(std::memory_order_relaxed)};
}

void ThreadPool::take_turn() {
  std::unique_lock lock(turn_mutex_);
  const uint64_t ticket = next_ticket_++;
  if (ticket == now_serving_) return;
  ++turn_waiters_;
  turn_.wait(lock, [&] { return now_serving_ == ticket; });
  --turn_waiters_;
}

void ThreadPool::end_turn() {
  std::lock_guard lock(turn_mutex_);
  ++now_serving_;
  if (turn_waiters_ > 0) turn_.notify_all();
}

void ThreadPool::run_parts() {
  for (;;) {
    const int ith = next_part_.fetch_add(1, std::memory_order_acq_rel);
    if (ith >= num_threads_) return;
    call_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), ith, num_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_main(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinPolls; ++i) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    run_parts();
  }
}

}  // namespace hearth

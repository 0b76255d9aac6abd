#pragma once
// ThreadPool: a persistent pool for data-parallel kernels. Work is split by the callee as (ith, nth);
// no threads are created and nothing is allocated per call.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace hearth {

// What the calls that used several threads spent at their ends: from the moment the calling thread had no part left
// to run until the last part finished. Parts that split their work well finish within microseconds of each other;
// a wait over kLongWait means a thread lost its core in the middle of a part (another task ran on it), and the call
// could not finish without it.
struct PoolWaits {
  static constexpr std::chrono::nanoseconds kLongWait{std::chrono::milliseconds(1)};
  uint64_t calls = 0;
  uint64_t wait_ns = 0;
  uint64_t long_waits = 0;
  uint64_t long_wait_ns = 0;
};

class ThreadPool {
 public:
  // `num_threads` counts the calling thread; 1 means everything runs inline. Values < 1 mean hardware concurrency.
  explicit ThreadPool(int num_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int num_threads() const { return num_threads_; }

  // Totals since the pool was made, over calls with more than one thread (PoolWaits); any thread may read them.
  PoolWaits waits() const;

  // Runs fn(ith, nth) exactly once for every ith in [0, nth), nth == num_threads(); the caller runs ith == 0
  // first. The other parts go to whichever thread claims them first (the caller included), so a worker the OS
  // has not scheduled yet does not hold up the call; fn must therefore not assume which thread runs a part.
  // Returns when all have finished. Not reentrant: fn must not call run() on the same pool. Several threads may
  // call run() (the engine loops of several models share one pool): their calls take turns in arrival order
  // (a ticket lock), whole call by whole call, so each uses every thread, the machine is never oversubscribed, and
  // a caller waits for at most one call of each other caller (a long prefill cannot starve another's decode).
  template <class F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch(
        [](void* ctx, int ith, int nth) { (*static_cast<Fn*>(ctx))(ith, nth); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Trampoline = void (*)(void*, int, int);
  void dispatch(Trampoline call, void* ctx);
  void worker_main(int ith);
  void run_parts();  // claims and runs parts [1, nth) of the current call until none are left

  int num_threads_;
  std::vector<std::thread> workers_;
  // The ticket lock of multi-threaded calls: a call owns the workers while now_serving_ is its ticket.
  void take_turn();
  void end_turn();
  std::mutex turn_mutex_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0;  // guarded by turn_mutex_
  uint64_t now_serving_ = 0;  // guarded by turn_mutex_
  int turn_waiters_ = 0;      // guarded by turn_mutex_
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};          // parts 1..nth-1 not finished yet
  std::atomic<int> next_part_{1 << 30};  // next part to claim; >= nth when all are claimed
  std::atomic<bool> stop_{false};
  std::atomic<Trampoline> call_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  // Written by the caller that holds the turn, read by anyone (waits()).
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> wait_ns_{0};
  std::atomic<uint64_t> long_waits_{0};
  std::atomic<uint64_t> long_wait_ns_{0};
};

// Splits [0, n) into nth near-equal contiguous ranges; returns the [begin, end) of part ith.
struct Range {
  int64_t begin;
  int64_t end;
};
inline Range split_range(int64_t n, int ith, int nth) {
  const int64_t per = n / nth;
  const int64_t extra = n % nth;
  const int64_t begin = ith * per + (ith < extra ? ith : extra);
  return {begin, begin + per + (ith < extra ? 1 : 0)};
}

}  // namespace hearth

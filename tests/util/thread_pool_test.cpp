#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "util/result.h"

namespace hearth {
namespace {

TEST(ThreadPool, RunsEveryPartExactlyOnce) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.num_threads(), n);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> hits(n);
      pool.run([&](int ith, int nth) {
        EXPECT_EQ(nth, n);
        hits[ith].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << n << " part " << i;
    }
  }
}

// Two engine loops share one pool: calls from two threads take turns; each call still sees its own parts exactly
// once and never another caller's, and no call is ever inside the pool while another is.
TEST(ThreadPool, CallsFromTwoThreadsTakeTurnsWholeCallByWholeCall) {
  ThreadPool pool(3);
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  auto caller = [&](int tag) {
    for (int round = 0; round < 300; ++round) {
      std::vector<std::atomic<int>> hits(3);
      pool.run([&](int ith, int nth) {
        if (ith == 0 && inside.fetch_add(1) != 0) overlap = true;
        EXPECT_EQ(nth, 3);
        hits[ith].fetch_add(tag);
        if (ith == 0) inside.fetch_sub(1);
      });
      for (int i = 0; i < 3; ++i) ASSERT_EQ(hits[i].load(), tag) << "caller " << tag << " part " << i;
    }
  };
  std::thread a(caller, 1);
  std::thread b(caller, 2);
  a.join();
  b.join();
  EXPECT_FALSE(overlap.load());
}

// Parts go to whichever thread claims them, but part 0 is always the caller's, and with 8 threads on a small
// machine the caller usually claims some workers' parts too: every part still runs once, on some pool thread.
TEST(ThreadPool, CallerRunsPartZeroAndPartsRunOnPoolThreads) {
  ThreadPool pool(8);
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 200; ++round) {
    std::vector<std::thread::id> ran_on(8);
    pool.run([&](int ith, int) { ran_on[ith] = std::this_thread::get_id(); });
    ASSERT_EQ(ran_on[0], caller);
    for (const auto& id : ran_on) ASSERT_NE(id, std::thread::id{});
  }
}

// A call whose last part runs on a thread that is held up after the caller is done counts one long wait, and
// waits() adds it up; calls that finish together add calls and no long wait. Part 1 must run on the pool's
// thread: part 0 holds the caller until part 1 has started.
TEST(ThreadPool, AWaitForAHeldUpPartCountsAsALongWait) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.waits().calls, 0u);
  for (int round = 0; round < 50; ++round) pool.run([](int, int) {});
  const PoolWaits before = pool.waits();
  EXPECT_EQ(before.calls, 50u);
  std::atomic<bool> part1_started{false};
  std::atomic<bool> part0_done{false};
  constexpr auto kHeldUp = std::chrono::milliseconds(20);
  pool.run([&](int ith, int) {
    if (ith == 0) {
      while (!part1_started.load()) std::this_thread::yield();
      part0_done = true;
    } else {
      part1_started = true;
      while (!part0_done.load()) std::this_thread::yield();
      std::this_thread::sleep_for(kHeldUp);
    }
  });
  const PoolWaits after = pool.waits();
  EXPECT_EQ(after.calls, before.calls + 1);
  EXPECT_EQ(after.long_waits, before.long_waits + 1);
  EXPECT_GE(after.long_wait_ns - before.long_wait_ns, static_cast<uint64_t>(PoolWaits::kLongWait.count()));
  EXPECT_GE(after.wait_ns - before.wait_ns, after.long_wait_ns - before.long_wait_ns);

  ThreadPool inline_pool(1);  // everything runs on the caller: nothing to wait for, nothing counted
  inline_pool.run([](int, int) {});
  EXPECT_EQ(inline_pool.waits().calls, 0u);
}

TEST(ThreadPool, SplitRangeCoversEverythingOnce) {
  for (int64_t n : {0, 1, 5, 16, 17, 1000}) {
    for (int nth : {1, 2, 3, 7, 64}) {
      int64_t expected_begin = 0;
      for (int ith = 0; ith < nth; ++ith) {
        const Range r = split_range(n, ith, nth);
        EXPECT_EQ(r.begin, expected_begin);
        EXPECT_LE(r.end - r.begin, n / nth + 1);
        expected_begin = r.end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

TEST(Result, CarriesValueOrError) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad = make_error("bad {} at {}", "thing", 12);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "bad thing at 12");
  Result<void> fine;
  EXPECT_TRUE(fine.ok());
}

}  // namespace
}  // namespace hearth

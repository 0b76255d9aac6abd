// ModelHost with fake models (no weights, no engine): lazy loads, one load for requests that arrive together, LRU
// unloads under the budget, never a busy model, the numbers when a model can never fit, keep-alive. Waits are on
// events (futures, joins), never sleeps.
#include "server/models/model_host.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "util/result.h"

namespace hearth::server {
namespace {

struct Counts {
  std::atomic<int> loads{0};
  std::atomic<int> unloads{0};
  std::atomic<int> in_flight{0};
};

class FakeModel : public ServedModel {
 public:
  FakeModel(Counts& counts, std::promise<void>** unloaded) : counts_(counts), unloaded_(unloaded) {}
  ~FakeModel() override {
    counts_.unloads++;
    if (*unloaded_ != nullptr) (*unloaded_)->set_value();
  }
  HttpServer& http() override { HEARTH_CHECK(false, "the host never needs a fake's routes"); }
  int num_in_flight() override { return counts_.in_flight.load(); }

 private:
  Counts& counts_;
  std::promise<void>** unloaded_;  // the test's current promise, read when the model goes
};

ModelSpec spec(std::string id, int64_t bytes) {
  ModelSpec s;
  s.id = std::move(id);
  s.cost = {bytes, 0};
  return s;
}

struct Host {
  std::vector<Counts> counts;
  std::promise<void>* unloaded = nullptr;  // set before an unload the test waits for
  std::function<void()> before_load;       // runs inside the loader
  std::unique_ptr<ModelHost> host;

  Host(int64_t budget, std::vector<ModelSpec> specs, std::chrono::milliseconds keep_alive = {}) : counts(specs.size()) {
    ModelHostConfig config;
    config.budget_bytes = budget;
    config.keep_alive = keep_alive;
    config.load_timeout = std::chrono::seconds(20);
    host = std::make_unique<ModelHost>(config, std::move(specs),
                                       [this](const ModelSpec&, size_t i) -> Result<std::unique_ptr<ServedModel>> {
                                         if (before_load) before_load();
                                         counts[i].loads++;
                                         return std::unique_ptr<ServedModel>(new FakeModel(counts[i], &unloaded));
                                       });
  }
  ModelState state(size_t i) { return host->status(i).state; }
};

TEST(ModelHost, LoadsOnFirstUseOnlyAndKeepsTheModel) {
  Host h(100, {spec("a", 10), spec("b", 10)});
  EXPECT_EQ(h.state(0), ModelState::kUnloaded);
  for (int k = 0; k < 3; ++k) {
    auto lease = h.host->acquire(0);
    ASSERT_TRUE(lease.ok());
  }
  EXPECT_EQ(h.counts[0].loads, 1);
  EXPECT_EQ(h.counts[1].loads, 0);
  EXPECT_EQ(h.state(0), ModelState::kLoaded);
  EXPECT_EQ(h.host->used_bytes(), 10);
}

TEST(ModelHost, ABudgetForOneUnloadsTheLeastRecentlyUsed) {
  Host h(25, {spec("a", 10), spec("b", 10), spec("c", 10)});
  (void)h.host->acquire(0);
  (void)h.host->acquire(1);
  EXPECT_EQ(h.host->used_bytes(), 20);
  (void)h.host->acquire(0);  // b is now the least recently used
  (void)h.host->acquire(2);
  EXPECT_EQ(h.state(0), ModelState::kLoaded);
  EXPECT_EQ(h.state(1), ModelState::kUnloaded);
  EXPECT_EQ(h.state(2), ModelState::kLoaded);
  EXPECT_EQ(h.counts[1].unloads, 1);
  EXPECT_EQ(h.host->counters().num_unloads, 1u);
}

TEST(ModelHost, AModelThatCanNeverFitIsRefusedWithTheNumbers) {
  Host h(1 << 20, {spec("small", 1), spec("huge", 2 << 20)});
  auto r = h.host->acquire(1);
  ASSERT_FALSE(r.ok());
  const ApiError& e = r.error();
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.code, "model_too_large");
  EXPECT_NE(e.message.find("2.00 MiB"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("1.00 MiB"), std::string::npos) << e.message;
  EXPECT_EQ(h.counts[1].loads, 0);
}

TEST(ModelHost, ABusyModelIsNotUnloadedUntilItsRequestsEnd) {
  Host h(15, {spec("a", 10), spec("b", 10)});
  {
    auto lease = h.host->acquire(0);
    ASSERT_TRUE(lease.ok());
    h.counts[0].in_flight = 1;  // a generation outlives the route's lease
  }
  std::promise<void> unloaded;
  h.unloaded = &unloaded;
  std::thread other([&] { EXPECT_TRUE(h.host->acquire(1).ok()); });
  // Whether b's request is already waiting or not, a stays loaded until its generation ends.
  EXPECT_EQ(h.counts[0].unloads, 0);
  h.counts[0].in_flight = 0;
  h.host->notify_idle(0);
  other.join();
  EXPECT_EQ(unloaded.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
  h.unloaded = nullptr;
  EXPECT_EQ(h.state(0), ModelState::kUnloaded);
  EXPECT_EQ(h.state(1), ModelState::kLoaded);
}

TEST(ModelHost, RequestsThatArriveTogetherShareOneLoad) {
  Host h(100, {spec("a", 10)});
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  h.before_load = [&] { started.wait(); };
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] { EXPECT_TRUE(h.host->acquire(0).ok()); });
  }
  go.set_value();
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.counts[0].loads, 1);
}

TEST(ModelHost, KeepAliveUnloadsAnIdleModel) {
  Host h(100, {spec("a", 10)}, std::chrono::milliseconds(1));
  std::promise<void> unloaded;
  h.unloaded = &unloaded;
  (void)h.host->acquire(0);
  ASSERT_EQ(unloaded.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  h.unloaded = nullptr;
  EXPECT_EQ(h.counts[0].unloads, 1);
}

TEST(ModelHost, DrainRefusesNewLeases) {
  Host h(100, {spec("a", 10)});
  EXPECT_TRUE(h.host->drain(std::chrono::milliseconds(0)));
  auto r = h.host->acquire(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 503);
}

}  // namespace
}  // namespace hearth::server

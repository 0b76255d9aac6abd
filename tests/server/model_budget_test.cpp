// ModelBudget (which models fit under one memory budget, which to unload) and the /metrics merge of several models,
// with exact numbers and no model.
#include "server/models/model_budget.h"

#include <gtest/gtest.h>

#include "server/models/model_router.h"

namespace hearth::server {
namespace {

using Clock = ModelBudget::Clock;
using Kind = ModelBudget::Plan::Kind;

const ModelBudget::BusyFn kNoneBusy = [](size_t) { return false; };

Clock::time_point at(int seconds) {
  return Clock::time_point{} + std::chrono::seconds(1000 + seconds);
}

// Loads i as the host does once a plan allows it.
void load(ModelBudget& b, size_t i, int when) {
  b.set_state(i, ModelState::kLoaded);
  b.touch(i, at(when));
}

TEST(ModelBudget, AModelFitsWhileTheBudgetHasRoom) {
  ModelBudget b(100);
  const size_t a = b.add("a", {30, 10});
  const size_t c = b.add("c", {40, 10});
  EXPECT_EQ(b.plan_load(a, kNoneBusy).kind, Kind::kFits);
  load(b, a, 0);
  EXPECT_EQ(b.used_bytes(), 40);
  const auto plan = b.plan_load(c, kNoneBusy);
  EXPECT_EQ(plan.kind, Kind::kFits);
  EXPECT_EQ(plan.free_bytes, 60);
  EXPECT_EQ(plan.needed_bytes, 50);
}

TEST(ModelBudget, TheLeastRecentlyUsedIdleModelsMakeRoomInOrder) {
  ModelBudget b(100);
  const size_t m0 = b.add("m0", {30, 0});
  const size_t m1 = b.add("m1", {30, 0});
  const size_t m2 = b.add("m2", {30, 0});
  const size_t big = b.add("big", {70, 0});
  load(b, m0, 0);
  load(b, m1, 1);
  load(b, m2, 2);
  b.touch(m0, at(3));  // m1 is now the least recently used, then m2, then m0
  auto plan = b.plan_load(big, kNoneBusy);
  ASSERT_EQ(plan.kind, Kind::kEvict);
  EXPECT_EQ(plan.victims, (std::vector<size_t>{m1, m2}));  // 10 free + 30 + 30 = 70
  // A busy model is skipped, the next one goes instead.
  plan = b.plan_load(big, [&](size_t i) { return i == m1; });
  ASSERT_EQ(plan.kind, Kind::kEvict);
  EXPECT_EQ(plan.victims, (std::vector<size_t>{m2, m0}));
}

TEST(ModelBudget, TiesInTimeBreakByTheOrderOfUse) {
  ModelBudget b(60);
  const size_t x = b.add("x", {30, 0});
  const size_t y = b.add("y", {30, 0});
  const size_t z = b.add("z", {30, 0});
  load(b, y, 5);
  load(b, x, 5);
  const auto plan = b.plan_load(z, kNoneBusy);
  ASSERT_EQ(plan.kind, Kind::kEvict);
  EXPECT_EQ(plan.victims, (std::vector<size_t>{y}));
}

TEST(ModelBudget, BusyModelsMakeALoadWaitAndLoadingOnesCount) {
  ModelBudget b(100);
  const size_t a = b.add("a", {60, 0});
  const size_t c = b.add("c", {60, 0});
  load(b, a, 0);
  const auto plan = b.plan_load(c, [](size_t) { return true; });
  EXPECT_EQ(plan.kind, Kind::kWait);
  EXPECT_TRUE(plan.victims.empty());
  EXPECT_NE(plan.message.find("busy"), std::string::npos) << plan.message;
  // A model being unloaded still holds its bytes; one being loaded has reserved them and cannot be a victim.
  b.set_state(a, ModelState::kUnloading);
  EXPECT_EQ(b.used_bytes(), 60);
  EXPECT_EQ(b.plan_load(c, kNoneBusy).kind, Kind::kWait);
  b.set_state(a, ModelState::kUnloaded);
  EXPECT_EQ(b.plan_load(c, kNoneBusy).kind, Kind::kFits);
  b.set_state(c, ModelState::kLoading);
  EXPECT_EQ(b.used_bytes(), 60);
  EXPECT_EQ(b.plan_load(a, kNoneBusy).kind, Kind::kWait);
}

TEST(ModelBudget, AModelLargerThanTheBudgetNeverFitsAndTheMessageHasTheNumbers) {
  ModelBudget b(1 << 20);
  const size_t huge = b.add("huge", {int64_t{3} << 20, int64_t{1} << 20});
  const auto plan = b.plan_load(huge, kNoneBusy);
  EXPECT_EQ(plan.kind, Kind::kNever);
  EXPECT_EQ(plan.needed_bytes, int64_t{4} << 20);
  EXPECT_EQ(plan.budget_bytes, 1 << 20);
  EXPECT_NE(plan.message.find("4.00 MiB"), std::string::npos) << plan.message;
  EXPECT_NE(plan.message.find("1.00 MiB"), std::string::npos) << plan.message;
  EXPECT_NE(plan.message.find("huge"), std::string::npos) << plan.message;
}

TEST(ModelBudget, TheServersOwnMemoryIsAlwaysUsedAndCountsAgainstEveryModel) {
  ModelBudget b(100, 25);  // the process holds 25 with no model
  const size_t a = b.add("a", {30, 10, 5});
  const size_t c = b.add("c", {40, 30, 10});
  EXPECT_EQ(b.used_bytes(), 25);
  EXPECT_EQ(b.process_bytes(), 25);
  const auto fits = b.plan_load(a, kNoneBusy);
  EXPECT_EQ(fits.kind, Kind::kFits);
  EXPECT_EQ(fits.needed_bytes, 45);  // weights + KV + runtime
  EXPECT_EQ(fits.free_bytes, 75);
  load(b, a, 0);
  EXPECT_EQ(b.used_bytes(), 70);
  const auto never = b.plan_load(c, kNoneBusy);  // 80 alone: more than 100 less the process's 25
  EXPECT_EQ(never.kind, Kind::kNever);
  EXPECT_EQ(never.message,
            "the model 'c' needs 80 B (40 B of weights + 30 B of KV pool + 10 B of scratch and tokenizer), more than "
            "the memory budget of 100 B less the 25 B the server itself holds (--memory; a smaller --kv-memory "
            "shrinks the pool)");
}

TEST(ModelBudget, KeepAliveExpiresIdleLoadedModelsOnly) {
  ModelBudget b(100);
  const size_t a = b.add("a", {10, 0});
  const size_t c = b.add("c", {10, 0});
  const size_t d = b.add("d", {10, 0});
  load(b, a, 0);
  load(b, c, 10);
  const auto keep = std::chrono::seconds(30);
  EXPECT_EQ(b.next_expiry(keep, kNoneBusy), at(30));
  EXPECT_EQ(b.next_expiry(keep, [&](size_t i) { return i == a; }), at(40));
  EXPECT_TRUE(b.expired(at(29), keep, kNoneBusy).empty());
  EXPECT_EQ(b.expired(at(30), keep, kNoneBusy), (std::vector<size_t>{a}));
  EXPECT_EQ(b.expired(at(45), keep, kNoneBusy), (std::vector<size_t>{a, c}));
  EXPECT_EQ(b.expired(at(45), keep, [&](size_t i) { return i == a; }), (std::vector<size_t>{c}));
  EXPECT_EQ(b.num_loads(a), 1u);
  EXPECT_EQ(b.num_loads(d), 0u);
  b.set_state(a, ModelState::kUnloaded);
  b.set_state(c, ModelState::kUnloaded);
  EXPECT_EQ(b.next_expiry(keep, kNoneBusy), Clock::time_point::max());
}

TEST(ModelBudget, AModelsOwnKeepAliveReplacesTheDefaultUntilItUnloads) {
  ModelBudget b(100);
  const size_t a = b.add("a", {10, 0});
  const size_t c = b.add("c", {10, 0});
  load(b, a, 0);
  load(b, c, 0);
  const auto keep = std::chrono::seconds(30);
  b.set_keep_alive(a, std::chrono::seconds(0));    // Ollama's keep_alive 0: unload once idle
  b.set_keep_alive(c, ModelBudget::kKeepForever);  // keep_alive -1: never for time alone
  EXPECT_EQ(b.expired(at(0), keep, kNoneBusy), (std::vector<size_t>{a}));
  EXPECT_EQ(b.next_expiry(keep, kNoneBusy), at(0));
  EXPECT_EQ(b.expired(at(100000), keep, kNoneBusy), (std::vector<size_t>{a}));
  EXPECT_EQ(b.keep_alive(c, keep), ModelBudget::kKeepForever);
  b.set_state(a, ModelState::kUnloaded);
  EXPECT_EQ(b.keep_alive(a, keep), Clock::duration(keep));  // unloading forgets it
  EXPECT_EQ(b.next_expiry(keep, kNoneBusy), Clock::time_point::max());
  b.set_keep_alive(c, std::nullopt);
  EXPECT_EQ(b.next_expiry(keep, kNoneBusy), at(30));
}

TEST(MergeModelMetrics, EverySampleGetsItsModelAndEachFamilyAppearsOnce) {
  const std::string a =
      "# HELP hearth_requests_running Running.\n# TYPE hearth_requests_running gauge\nhearth_requests_running 1\n"
      "# HELP hearth_kv_blocks Blocks.\n# TYPE hearth_kv_blocks gauge\nhearth_kv_blocks{state=\"used\"} 3\n"
      "hearth_kv_blocks{state=\"free\"} 5\n";
  const std::string b =
      "# HELP hearth_requests_running Running.\n# TYPE hearth_requests_running gauge\nhearth_requests_running 0\n"
      "# HELP hearth_kv_blocks Blocks.\n# TYPE hearth_kv_blocks gauge\nhearth_kv_blocks{state=\"used\"} 7\n";
  EXPECT_EQ(merge_model_metrics({{"a", a}, {"b\"q", b}}),
            "# HELP hearth_requests_running Running.\n# TYPE hearth_requests_running gauge\n"
            "hearth_requests_running{model=\"a\"} 1\nhearth_requests_running{model=\"b\\\"q\"} 0\n"
            "# HELP hearth_kv_blocks Blocks.\n# TYPE hearth_kv_blocks gauge\n"
            "hearth_kv_blocks{model=\"a\",state=\"used\"} 3\nhearth_kv_blocks{model=\"a\",state=\"free\"} 5\n"
            "hearth_kv_blocks{model=\"b\\\"q\",state=\"used\"} 7\n");
}

}  // namespace
}  // namespace hearth::server

// EngineLoop: requests submitted from several threads stream the same tokens the engine gives alone; dropping a
// handle aborts and frees; stopping wakes every reader.
#include "engine/engine_loop.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "engine/engine_test_util.h"  // tests/engine

namespace hearth {
namespace {

using testing::load_model;

EngineConfig small_engine_config() {
  EngineConfig c;
  c.kv_memory_bytes = 8 << 20;
  return c;
}

RequestSpec greedy(const Tokenizer& tok, const std::string& text, int32_t max_tokens) {
  RequestSpec spec;
  spec.prompt = tok.encode(text, true);
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = max_tokens;
  return spec;
}

std::string drain(RequestHandle& handle, FinishReason* reason) {
  std::string text;
  while (auto out = handle.next()) {
    text += out->new_text;
    if (out->finished) *reason = out->finish_reason;
  }
  return text;
}

TEST(EngineLoop, ThreadsStreamTheSameTextAsTheGoldenRun) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(2);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  std::vector<std::string> texts(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      auto handle = loop.submit(greedy(*m.tokenizer, "Once upon a time", 64));
      ASSERT_TRUE(handle.ok()) << handle.error().message;
      FinishReason reason = FinishReason::kNone;
      texts[i] = drain(**handle, &reason);
      EXPECT_EQ(reason, FinishReason::kLength);
    });
  }
  for (auto& c : clients) c.join();
  for (const auto& t : texts) {
    EXPECT_EQ(t,
              ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, "
              "red ball. She wanted to play with it, but it was too high.\nLily's mom said");
  }
  loop.run_on_loop([](Engine& e) { e.check_invariants(); });
}

TEST(EngineLoop, DroppedHandleAbortsAndFreesBlocks) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  {
    auto handle = loop.submit(greedy(*m.tokenizer, "Once upon a time", 400));
    ASSERT_TRUE(handle.ok());
    ASSERT_TRUE((*handle)->next().has_value());  // it is running
  }
  int32_t in_use = -1;
  bool unfinished = true;
  // The abort is queued before this call, so it has been applied when the call runs.
  loop.run_on_loop([&](Engine& e) {
    in_use = e.kv().pool().num_blocks_in_use();
    unfinished = e.scheduler().has_unfinished();
  });
  EXPECT_EQ(in_use, 0);
  EXPECT_FALSE(unfinished);
}

TEST(EngineLoop, SubmitErrorsComeBackAtOnce) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  RequestSpec strict = greedy(*m.tokenizer, "Once upon a time", 600);
  strict.strict_max_tokens = true;  // by default, 600 would be clamped to the room left
  auto handle = loop.submit(std::move(strict));
  ASSERT_FALSE(handle.ok());
  EXPECT_NE(handle.error().message.find("exceeds the model context"), std::string::npos);
  EXPECT_EQ(handle.error().code, SubmitErrorCode::kContextExceeded);
}

TEST(EngineLoop, StopWithoutDrainAbortsInFlightRequests) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  auto handle = loop.submit(greedy(*m.tokenizer, "Once upon a time", 500));
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE((*handle)->next().has_value());
  loop.stop(/*drain=*/false);
  FinishReason reason = FinishReason::kNone;
  drain(**handle, &reason);
  EXPECT_TRUE(reason == FinishReason::kAborted || reason == FinishReason::kLength);
  auto after_stop = loop.submit(greedy(*m.tokenizer, "Once", 4));
  ASSERT_FALSE(after_stop.ok());
  EXPECT_EQ(after_stop.error().code, SubmitErrorCode::kShuttingDown);
}

// stop(false) ends what is in flight as the engine's doing, not the client's: finish_reason aborted with
// runtime_error kShuttingDown, for a request that was running and for one accepted but not yet taken by the loop.
// The loop is held inside run_on_loop while stop() is called, so neither request can finish on its own first.
TEST(EngineLoop, StopWithoutDrainReportsShuttingDownNotAClientAbort) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  auto long_request = [&] {
    auto spec = greedy(*m.tokenizer, "Once upon a time", 500);
    spec.ignore_eos = true;
    return spec;
  };
  auto running = loop.submit(long_request());
  ASSERT_TRUE(running.ok()) << running.error().message;
  ASSERT_TRUE((*running)->next().has_value());  // it is running

  std::promise<void> held, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread holder([&] {
    loop.run_on_loop([&](Engine&) {
      held.set_value();
      released.wait();
    });
  });
  held.get_future().wait();
  auto queued = loop.submit(long_request());  // accepted; the held loop has not taken it
  ASSERT_TRUE(queued.ok()) << queued.error().message;
  std::thread stopper([&] { loop.stop(/*drain=*/false); });
  // stop() has set its flag once submit() refuses; only then may the loop go on.
  for (;;) {
    auto refused = loop.submit(long_request());
    if (!refused.ok() && refused.error().code == SubmitErrorCode::kShuttingDown) break;
  }
  release.set_value();
  for (RequestHandle* handle : {running->get(), queued->get()}) {
    std::optional<RequestOutput> last;
    while (auto out = handle->next()) last = std::move(out);
    ASSERT_TRUE(last.has_value());
    EXPECT_TRUE(last->finished);
    EXPECT_EQ(last->finish_reason, FinishReason::kAborted);
    ASSERT_TRUE(last->runtime_error.has_value());
    EXPECT_EQ(last->runtime_error->code, RuntimeErrorCode::kShuttingDown);
    EXPECT_LT(last->usage.completion_tokens, 500);
  }
  stopper.join();
  holder.join();
}

TEST(EngineLoop, ClientAbortIsNoRuntimeError) {
  auto& m = load_model(testing::kStories);
  ThreadPool pool(1);
  auto engine = *Engine::create(*m.model, *m.tokenizer, small_engine_config(), pool);
  EngineLoop loop(*engine);
  auto spec = greedy(*m.tokenizer, "Once upon a time", 500);
  spec.ignore_eos = true;
  auto handle = loop.submit(spec);
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE((*handle)->next().has_value());
  (*handle)->abort();
  std::optional<RequestOutput> last;
  while (auto out = (*handle)->next()) last = std::move(out);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->finish_reason, FinishReason::kAborted);
  EXPECT_FALSE(last->runtime_error.has_value());
}

}  // namespace
}  // namespace hearth

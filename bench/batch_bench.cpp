// hearth-bench-batch: what continuous batching buys, measured in one run.
//   1. decode throughput: one sequence alone vs N sequences decoding together (their decode tokens share one
//      matmul per weight per step);
//   2. inter-token latency of decoding sequences while another request's long prompt is prefilled in chunks.
//
//   hearth-bench-batch -m MODEL.gguf [--users 8] [--decode-tokens 64] [--long-prompt 2000] [-t 2]

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_client/bench_tokens.h"
#include "engine/engine.h"
#include "model/loaded_model.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string model_path;
  int32_t users = 8;
  int32_t prompt_tokens = 32;
  int32_t decode_tokens = 64;
  int32_t long_prompt = 2000;
  int32_t max_batch_tokens = 512;
  int threads = 0;
  int64_t kv_memory_mib = 1024;
};

// BOS, then n - 1 random normal tokens.
std::vector<TokenId> random_prompt(const Tokenizer& tok, int32_t n, std::mt19937& rng) {
  std::vector<TokenId> out{tok.bos()};
  const auto body = random_normal_tokens(tok, n - 1, rng);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

RequestSpec spec_for(std::vector<TokenId> prompt, int32_t max_tokens) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  spec.use_cache = false;  // measure compute, not reuse
  return spec;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Runs `n` sequences to completion; returns decode tokens/s over the steps in which every live sequence decodes.
double decode_throughput(Engine& engine, const Tokenizer& tok, int32_t n, const Flags& f, std::mt19937& rng) {
  for (int32_t i = 0; i < n; ++i) {
    HEARTH_CHECK(engine.add_request(spec_for(random_prompt(tok, f.prompt_tokens, rng), f.decode_tokens)).ok(), "");
  }
  double decode_seconds = 0;
  int64_t decode_tokens = 0;
  while (engine.has_unfinished()) {
    const uint64_t before = engine.counters().num_prefill_tokens;
    const auto start = Clock::now();
    const auto outputs = engine.step();
    const double dt = seconds(Clock::now() - start);
    if (engine.counters().num_prefill_tokens != before) continue;  // a prefill step: not pure decode
    decode_seconds += dt;
    for (const auto& out : outputs) decode_tokens += static_cast<int64_t>(out.new_tokens.size());
  }
  return decode_tokens / decode_seconds;
}

// Decoding sequences keep going while a long prompt arrives; returns their inter-token latencies (ms) during
// the long prompt's prefill.
std::vector<double> latency_during_prefill(Engine& engine, const Tokenizer& tok, const Flags& f, std::mt19937& rng,
                                           int* prefill_steps) {
  const int32_t n_decoders = std::max(1, f.users / 2);
  std::vector<RequestId> decoders;
  for (int32_t i = 0; i < n_decoders; ++i) {
    auto id = engine.add_request(
        spec_for(random_prompt(tok, f.prompt_tokens, rng), engine.max_model_len() - f.prompt_tokens));
    HEARTH_CHECK(id.ok(), "{}", id.error().message);
    decoders.push_back(*id);
  }
  while (engine.scheduler().num_waiting() > 0 || engine.counters().num_decode_tokens == 0) engine.step();
  auto long_id = engine.add_request(spec_for(random_prompt(tok, f.long_prompt, rng), 1));
  HEARTH_CHECK(long_id.ok(), "{}", long_id.error().message);
  std::vector<double> latencies;
  *prefill_steps = 0;
  for (bool long_done = false; !long_done;) {
    const auto start = Clock::now();
    const auto outputs = engine.step();
    latencies.push_back(seconds(Clock::now() - start) * 1000.0);
    ++*prefill_steps;
    for (const auto& out : outputs) long_done |= out.id == *long_id && out.finished;
  }
  for (RequestId id : decoders) engine.abort(id);
  while (engine.has_unfinished()) engine.step();
  return latencies;
}

int run(const Flags& f) {
  auto loaded = load_model_file(f.model_path);
  if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  ThreadPool pool(f.threads);
  EngineConfig config;
  config.kv_memory_bytes = f.kv_memory_mib << 20;
  config.max_batch_tokens = f.max_batch_tokens;
  auto engine = Engine::create(model, tok, config, pool);
  if (!engine) return std::fprintf(stderr, "error: %s\n", engine.error().message.c_str()), 1;
  std::mt19937 rng(7);
  std::printf("model %s, %d threads, step budget %d tokens\n", f.model_path.c_str(), pool.num_threads(),
              f.max_batch_tokens);
  const double single = decode_throughput(**engine, tok, 1, f, rng);
  const double batched = decode_throughput(**engine, tok, f.users, f, rng);
  std::printf("decode: 1 sequence %.1f tok/s, %d sequences %.1f tok/s aggregate: %.2fx\n", single, f.users, batched,
              batched / single);
  int steps = 0;
  auto lat = latency_during_prefill(**engine, tok, f, rng, &steps);
  std::sort(lat.begin(), lat.end());
  const double p50 = lat[(lat.size() - 1) / 2];
  const double p95 = lat[std::min(lat.size() - 1, static_cast<size_t>(0.95 * lat.size()))];
  std::printf("inter-token latency of %d decoding sequences while a %d-token prompt prefills over %d steps: "
              "p50 %.1f ms, p95 %.1f ms, max %.1f ms\n",
              std::max(1, f.users / 2), f.long_prompt, steps, p50, p95, lat.back());
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  hearth::Flags f;
  CLI::App app{"Continuous-batching benchmark: batched decode throughput and latency during a long prefill"};
  app.add_option("-m,--model", f.model_path, "GGUF model")->required()->check(CLI::ExistingFile);
  app.add_option("--users", f.users, "Concurrent decoding sequences")->capture_default_str();
  app.add_option("--prompt-tokens", f.prompt_tokens, "Prompt length of each decoding sequence")->capture_default_str();
  app.add_option("--decode-tokens", f.decode_tokens, "Tokens each sequence generates")->capture_default_str();
  app.add_option("--long-prompt", f.long_prompt, "Tokens of the prompt prefilled during decoding")
      ->capture_default_str();
  app.add_option("--max-batch-tokens", f.max_batch_tokens, "Per-step token budget")->capture_default_str();
  app.add_option("-t,--threads", f.threads, "Threads; 0 uses every core")->capture_default_str();
  app.add_option("--kv-memory-mib", f.kv_memory_mib, "KV pool size in MiB")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return hearth::run(f);
}

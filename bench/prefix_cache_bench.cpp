// hearth-bench-prefix: the prefix cache's headline number. One long shared prefix, then several different short
// suffixes in sequence; cold TTFT (first request computes the prefix) against warm TTFT (the rest reuse it),
// measured in the same run on the same engine. Also what a lookup's hashing costs: the prefix's chain of block
// keys (SHA-256 per block), which admission computes a few times per request.
//
//   hearth-bench-prefix -m MODEL.gguf [--prefix-tokens 2000] [--suffixes 16] [--suffix-tokens 16] [-t 2]

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_client/bench_tokens.h"
#include "engine/engine.h"
#include "kv/block_hash.h"
#include "model/loaded_model.h"

namespace hearth {
namespace {

struct Flags {
  std::string model_path;
  int32_t prefix_tokens = 2000;
  int32_t num_suffixes = 16;
  int32_t suffix_tokens = 16;
  int threads = 0;
  int32_t block_size = 16;
  int64_t kv_memory_mib = 1024;
  uint32_t seed = 1;
};


RequestUsage run_one(Engine& engine, std::vector<TokenId> prompt) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = 1;
  spec.ignore_eos = true;
  auto id = engine.add_request(spec);
  HEARTH_CHECK(id.ok(), "{}", id.error().message);
  RequestUsage usage;
  while (engine.has_unfinished()) {
    for (const RequestOutput& out : engine.step()) {
      if (out.finished) usage = out.usage;
    }
  }
  return usage;
}

int run(const Flags& f) {
  auto loaded = load_model_file(f.model_path);
  if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  ThreadPool pool(f.threads);
  EngineConfig config;
  config.block_size = f.block_size;
  config.kv_memory_bytes = f.kv_memory_mib << 20;
  auto engine = Engine::create(model, tok, config, pool);
  if (!engine) return std::fprintf(stderr, "error: %s\n", engine.error().message.c_str()), 1;

  std::mt19937 rng(f.seed);
  std::vector<TokenId> prefix{tok.bos()};
  const auto body = random_normal_tokens(tok, f.prefix_tokens - 1, rng);
  prefix.insert(prefix.end(), body.begin(), body.end());
  std::printf("model %s, %d threads, block size %d\n", f.model_path.c_str(), pool.num_threads(), f.block_size);
  std::printf("%-8s %8s %8s %8s %10s\n", "request", "prompt", "reused", "computed", "TTFT ms");
  std::vector<double> warm;
  double cold = 0;
  for (int32_t i = 0; i <= f.num_suffixes; ++i) {
    auto prompt = prefix;
    const auto suffix = random_normal_tokens(tok, f.suffix_tokens, rng);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    const RequestUsage u = run_one(**engine, prompt);
    std::printf("%-8s %8d %8d %8d %10.1f\n", i == 0 ? "cold" : ("warm " + std::to_string(i)).c_str(), u.prompt_tokens,
                u.cached_tokens, u.prompt_tokens - u.cached_tokens, u.ttft_ms);
    if (i == 0) cold = u.ttft_ms;
    else warm.push_back(u.ttft_ms);
  }
  std::sort(warm.begin(), warm.end());
  const double p50 = warm.empty() ? 0 : warm[(warm.size() - 1) / 2];
  std::printf("\ncold TTFT %.1f ms, warm TTFT p50 %.1f ms over %zu suffixes: warm/cold = %.4f (%.2f%%), %.1fx faster\n",
              cold, p50, warm.size(), p50 / cold, 100.0 * p50 / cold, cold / p50);
  // The prefix's block keys, as a lookup chains them: best of 200 repeats.
  const int32_t n_blocks = static_cast<int32_t>(prefix.size()) / f.block_size;
  double best_us = 1e30;
  BlockHash last{};
  for (int rep = 0; rep < 200; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    BlockHash parent{};
    for (int32_t b = 0; b < n_blocks; ++b) {
      const auto block = std::span(prefix).subspan(static_cast<size_t>(b) * f.block_size, f.block_size);
      parent = hash_block(parent, BlockHash{}, block);
    }
    best_us = std::min(best_us, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e6);
    last = parent;
  }
  std::printf("block keys of the prefix: %d blocks in %.1f us (%.3f us per block, best of 200; last key %02x%02x)\n",
              n_blocks, best_us, best_us / std::max(n_blocks, 1), last.bytes[0], last.bytes[1]);
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  hearth::Flags f;
  CLI::App app{"Prefix-cache benchmark: cold vs warm time to first token over a shared prefix"};
  app.add_option("-m,--model", f.model_path, "GGUF model")->required()->check(CLI::ExistingFile);
  app.add_option("--prefix-tokens", f.prefix_tokens, "Shared prefix length in tokens")->capture_default_str();
  app.add_option("--suffixes", f.num_suffixes, "Warm requests after the cold one")->capture_default_str();
  app.add_option("--suffix-tokens", f.suffix_tokens, "Tokens in each different suffix")->capture_default_str();
  app.add_option("-t,--threads", f.threads, "Threads; 0 uses every core")->capture_default_str();
  app.add_option("--block-size", f.block_size, "KV block size in tokens")->capture_default_str();
  app.add_option("--kv-memory-mib", f.kv_memory_mib, "KV pool size in MiB")->capture_default_str();
  app.add_option("--seed", f.seed, "Workload seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return hearth::run(f);
}

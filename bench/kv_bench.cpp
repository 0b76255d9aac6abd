// hearth-bench-kv: what each KV dtype costs and saves, side by side in one run.
//   - capacity: tokens the same --kv-memory holds (block scales included), relative to f16;
//   - quality: over a fixed text, the KL divergence and top-1 agreement of every next-token distribution
//     against f32 KV, and the text's perplexity;
//   - speed: prefill tokens/s of a --prefill-token prompt and decode tokens/s after it, relative to f16.
//
//   hearth-bench-kv -m MODEL.gguf [--text bench/data/kv_quality.txt] [--window 512] [-t 2]
//
// Logits for every position come from one forward pass per window in which each token is its own one-token
// sequence over a shared block table: exactly the arithmetic of decoding the text token by token.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kv/kv_plan.h"
#include "model/kv_storage.h"
#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

struct Flags {
  std::string model_path;
  std::string text_path = "bench/data/kv_quality.txt";
  int32_t window = 512;
  int32_t prefill_tokens = 512;
  int32_t decode_tokens = 32;
  int64_t kv_memory_mib = 1024;
  int threads = 0;
};

using Clock = std::chrono::steady_clock;

// Log-softmax of one logits row, in double.
std::vector<double> log_softmax(const float* logits, int32_t n) {
  double max = -INFINITY;
  for (int32_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  const double log_z = max + std::log(sum);
  std::vector<double> out(n);
  for (int32_t i = 0; i < n; ++i) out[i] = logits[i] - log_z;
  return out;
}

// Logits of every position of `tokens` (one row each) with KV stored in `format`.
std::vector<float> all_logits(Model& model, std::span<const TokenId> tokens, const KvFormat& format, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t bs = 16;
  auto kv = KvStorage::create({c.n_layers, c.n_kv_heads, c.head_dim}, format, bs, (n + bs - 1) / bs);
  HEARTH_CHECK(kv.ok(), "{}", kv.error().message);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < (*kv)->num_blocks(); ++b) table.push_back(BlockId{b});
  std::vector<BatchSequence> seqs;
  for (int32_t i = 0; i < n; ++i) seqs.push_back({i, 1, i, table, true});
  auto logits = model.forward({tokens, seqs}, **kv, pool);
  return {logits.begin(), logits.end()};
}

struct Quality {
  double kl = 0;  // mean KL(f32 || this) in nats
  double kl_max = 0;
  double top1 = 0;  // share of positions whose argmax equals f32's
  double nll = 0;   // mean negative log-likelihood of the text's next token
  int64_t positions = 0;
};

struct Speed {
  double prefill_tps = 0;
  double decode_tps = 0;
};

// One prompt of `prefill` tokens in a single forward, then `decode` single-token steps.
Speed measure_speed(Model& model, std::span<const TokenId> text, const KvFormat& format, const Flags& f,
                    ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const int32_t bs = 16;
  const int32_t n = f.prefill_tokens + f.decode_tokens;
  auto kv = KvStorage::create({c.n_layers, c.n_kv_heads, c.head_dim}, format, bs, (n + bs - 1) / bs);
  HEARTH_CHECK(kv.ok(), "{}", kv.error().message);
  std::vector<BlockId> table;
  for (int32_t b = 0; b < (*kv)->num_blocks(); ++b) table.push_back(BlockId{b});
  std::vector<TokenId> tokens;
  for (int32_t i = 0; i < n; ++i) tokens.push_back(text[i % text.size()]);
  BatchSequence prompt{0, f.prefill_tokens, 0, table, true};
  const auto t0 = Clock::now();
  model.forward({std::span(tokens).first(f.prefill_tokens), {&prompt, 1}}, **kv, pool);
  const auto t1 = Clock::now();
  for (int32_t i = 0; i < f.decode_tokens; ++i) {
    BatchSequence step{0, 1, f.prefill_tokens + i, table, true};
    model.forward({std::span(tokens).subspan(f.prefill_tokens + i, 1), {&step, 1}}, **kv, pool);
  }
  const auto t2 = Clock::now();
  return {f.prefill_tokens / std::chrono::duration<double>(t1 - t0).count(),
          f.decode_tokens / std::chrono::duration<double>(t2 - t1).count()};
}

int run(const Flags& f) {
  auto loaded = load_model_file(f.model_path);
  if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  Model& model = *loaded->model;
  const ModelConfig& c = model.config();
  std::ifstream in(f.text_path);
  if (!in) return std::fprintf(stderr, "error: cannot read %s\n", f.text_path.c_str()), 1;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::vector<TokenId> text = loaded->tokenizer->encode(buffer.str(), true);
  const int32_t window = std::min<int32_t>(f.window, c.n_ctx_train);
  if (f.prefill_tokens + f.decode_tokens > c.n_ctx_train) {
    return std::fprintf(stderr, "error: --prefill + --decode exceed the model's context of %d\n", c.n_ctx_train), 1;
  }
  ThreadPool pool(f.threads);

  std::vector<KvFormat> formats;
  for (KvDtype t : all_kv_dtypes()) formats.push_back({t, t});
  formats.push_back({KvDtype::kQ8_0, KvDtype::kQ4_0});

  // Quality: windows of the text, each scored from position 0 (every window starts with its own first token).
  std::vector<Quality> quality(formats.size());
  for (size_t begin = 0; begin + 1 < text.size(); begin += window) {
    const auto span = std::span(text).subspan(begin, std::min<size_t>(window, text.size() - begin));
    std::vector<std::vector<float>> logits;
    for (const KvFormat& fmt : formats) logits.push_back(all_logits(model, span, fmt, pool));
    for (size_t pos = 0; pos + 1 < span.size(); ++pos) {
      const auto ref = log_softmax(logits[0].data() + pos * c.n_vocab, c.n_vocab);
      const auto ref_top = std::max_element(ref.begin(), ref.end()) - ref.begin();
      for (size_t fi = 0; fi < formats.size(); ++fi) {
        const auto lp = log_softmax(logits[fi].data() + pos * c.n_vocab, c.n_vocab);
        double kl = 0;
        for (int32_t v = 0; v < c.n_vocab; ++v) kl += std::exp(ref[v]) * (ref[v] - lp[v]);
        Quality& q = quality[fi];
        q.kl += kl;
        q.kl_max = std::max(q.kl_max, kl);
        q.top1 += (std::max_element(lp.begin(), lp.end()) - lp.begin()) == ref_top;
        q.nll -= lp[span[pos + 1].value];
        ++q.positions;
      }
    }
  }

  // Speed, relative to f16 (index 1). Two rounds; each format keeps its best.
  std::vector<Speed> speed(formats.size());
  for (int round = 0; round < 2; ++round) {
    for (size_t fi = 0; fi < formats.size(); ++fi) {
      const Speed s = measure_speed(model, text, formats[fi], f, pool);
      speed[fi].prefill_tps = std::max(speed[fi].prefill_tps, s.prefill_tps);
      speed[fi].decode_tps = std::max(speed[fi].decode_tps, s.decode_tps);
    }
  }

  const KvShape shape{c.n_layers, c.n_kv_heads, c.head_dim};
  const int64_t budget = f.kv_memory_mib << 20;
  const int64_t f16_tokens = plan_kv_pool(shape, *kv_token_cost(shape, formats[1]), 16, budget)->capacity_tokens;
  std::printf("model %s: %d layers, %d KV heads of %d; %lld text tokens scored in windows of %d; %d threads\n",
              f.model_path.c_str(), c.n_layers, c.n_kv_heads, c.head_dim, static_cast<long long>(quality[0].positions),
              window, pool.num_threads());
  std::printf("capacity at --kv-memory %lld MiB; speed: %d-token prefill, then %d decode steps\n\n",
              static_cast<long long>(f.kv_memory_mib), f.prefill_tokens, f.decode_tokens);
  std::printf("%-14s %9s %10s %7s %10s %9s %9s %8s %11s %9s %10s\n", "KV dtype", "B/token", "tokens", "vs f16",
              "KL mean", "KL max", "top-1", "ppl", "prefill t/s", "vs f16", "decode t/s");
  for (size_t fi = 0; fi < formats.size(); ++fi) {
    const auto plan = plan_kv_pool(shape, *kv_token_cost(shape, formats[fi]), 16, budget);
    const Quality& q = quality[fi];
    std::printf(
        "%-14s %9lld %10s %6.2fx %10.2e %9.2e %8.2f%% %8.3f %11.1f %8.2fx %10.1f (%.2fx)\n", formats[fi].name().c_str(),
        static_cast<long long>(plan->bytes_per_token), format_thousands(plan->capacity_tokens).c_str(),
        static_cast<double>(plan->capacity_tokens) / f16_tokens, q.kl / q.positions, q.kl_max,
        100.0 * q.top1 / q.positions, std::exp(q.nll / q.positions), speed[fi].prefill_tps,
        speed[fi].prefill_tps / speed[1].prefill_tps, speed[fi].decode_tps, speed[fi].decode_tps / speed[1].decode_tps);
  }
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  hearth::Flags f;
  CLI::App app{"hearth-bench-kv: capacity, quality and speed of each KV dtype, side by side"};
  app.add_option("-m,--model", f.model_path, "GGUF model")->required();
  app.add_option("--text", f.text_path, "Text to score")->capture_default_str();
  app.add_option("--window", f.window, "Tokens per scored window (capped at the model's context)")
      ->capture_default_str();
  app.add_option("--prefill", f.prefill_tokens, "Prompt tokens for the speed test")->capture_default_str();
  app.add_option("--decode", f.decode_tokens, "Decode steps for the speed test")->capture_default_str();
  app.add_option("--kv-memory-mib", f.kv_memory_mib, "Budget for the capacity column")->capture_default_str();
  app.add_option("-t,--threads", f.threads, "Threads; 0 uses every core")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return hearth::run(f);
}

// hearth bench model: prefill and decode speed of a GGUF model on this machine, next to the machine's own limits
// (read bandwidth, OpenBLAS sgemm FLOP/s) measured in the same run, and the fraction of each that Hearth reaches.
//
//   (unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; hearth bench model -m MODEL.gguf -p 512 -n 64 -t 2 [--json])

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "app/commands.h"
#include "app/machine_limits.h"
#include "bench_client/bench_tokens.h"
#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace hearth::app {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchModelFlags {
  std::string model_path;
  int32_t prompt_tokens = 512;
  int32_t decode_tokens = 64;
  int32_t depth = 0;          // decode starts after a prompt of this many tokens (llama-bench's tg starts at 0)
  int32_t prefill_depth = 0;  // the -p prompt follows this many cached tokens (a chat's later turn)
  int32_t repetitions = 1;    // timed prefill passes; the median is reported
  int threads = 0;
  int64_t bandwidth_mib = 1024;
  std::string kv_dtype = "f16";
  bool json = false;
};

// What one token's forward pass reads and computes: every weight matrix once (the embedding tables, gemma4's per-layer
// one too, only as one row, unless it is tied to the output), so matmul parameters and their stored bytes; of a mixture
// of experts' 3-D expert tensors only the expert_used_count experts a token chooses (a batch of many tokens reads
// more).
struct WeightTotals {
  double bytes_per_token = 0;
  double params = 0;
};

// The share of a layer's experts that one token reads: expert_used_count / expert_count, 1 for a dense model.
double active_expert_share(const GgufFile& file) {
  auto arch = file.get_string("general.architecture");
  if (!arch.ok() || !arch->has_value()) return 1.0;
  auto used = file.get_uint(**arch + ".expert_used_count");
  auto count = file.get_uint(**arch + ".expert_count");
  if (!used.ok() || !count.ok() || !used->has_value() || !count->has_value() || **count == 0) return 1.0;
  return static_cast<double>(**used) / static_cast<double>(**count);
}

WeightTotals weight_totals(const GgufFile& file) {
  const bool tied = file.find_tensor("output.weight") == nullptr;
  const double expert_share = active_expert_share(file);
  WeightTotals totals;
  for (const GgufTensor& t : file.tensors()) {
    if (t.n_dims < 2) continue;  // norms: negligible and not matmuls
    if (t.name == "token_embd.weight" && !tied) continue;
    if (t.name == "per_layer_token_embd.weight") continue;  // gemma4's per-layer embeddings: one row per token
    const double share = t.name.ends_with("_exps.weight") ? expert_share : 1.0;
    totals.bytes_per_token += static_cast<double>(t.nbytes) * share;
    totals.params += static_cast<double>(t.num_elements()) * share;
  }
  return totals;
}

struct ModelSpeed {
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  double prefill_s = 0;
  double decode_s = 0;
  double prefill_cpu_s = 0;  // process CPU time: below threads × wall when other processes take the cores
  double decode_cpu_s = 0;
  // During the decode steps: what the thread pool's calls waited at their ends (PoolWaits), and how often the
  // process lost a core to another task (involuntary context switches).
  PoolWaits decode_waits;
  long decode_preemptions = 0;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

long involuntary_switches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nivcsw;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int32_t decode_start_of(const BenchModelFlags& f) {
  return f.depth > 0 ? f.depth : f.prefill_depth + f.prompt_tokens;
}

// Positions the run writes: the prompt after its cached context, or the decode depth, then the decode steps.
int32_t positions_of(const BenchModelFlags& f) {
  return std::max(f.prefill_depth + f.prompt_tokens, f.depth) + f.decode_tokens;
}

// One sequence: a warm-up pass (pages the mmapped weights in), then the whole prompt in one forward pass, then
// `decode_tokens` single-token steps feeding back the argmax. With a prefill depth, the prompt follows an untimed
// context of that many tokens (prefilled in one pass from position 0), as a chat's later turn follows its cached
// history; with repetitions, the prompt's pass runs that many times over the same positions (rewriting the same
// K/V) and the median counts. With a depth, the decode steps instead follow an untimed `depth`-token prompt
// (prefilled in one pass from position 0), so attention reads that many keys.
ModelSpeed measure_model(Model& model, const Tokenizer& tok, const BenchModelFlags& f, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  constexpr int32_t kBlockSize = 16;
  const int32_t n_positions = positions_of(f);
  const int32_t n_blocks = (n_positions + kBlockSize - 1) / kBlockSize;
  auto format = parse_kv_dtype(f.kv_dtype);
  HEARTH_CHECK(format.ok(), "{}", format.error().message);
  auto storage = KvStorage::create(c.kv_shape(), {*format, *format}, kBlockSize, n_blocks);
  HEARTH_CHECK(storage.ok(), "{}", storage.error().message);
  KvStorage& kv = **storage;
  if (c.is_hybrid()) kv.reserve_state_slots(1, c.recurrent_state_floats());  // the one sequence's slot 0
  std::vector<BlockId> block_table;
  for (int32_t b = 0; b < n_blocks; ++b) block_table.push_back(BlockId{b});
  std::mt19937 rng(7);
  std::vector<TokenId> prompt{tok.bos()};
  const auto body = random_normal_tokens(tok, std::max(f.prefill_depth + f.prompt_tokens, f.depth) - 1, rng);
  prompt.insert(prompt.end(), body.begin(), body.end());

  const int32_t n_warm = std::min<int32_t>(16, f.prompt_tokens);
  BatchSequence warm{0, n_warm, 0, block_table, true};
  (void)model.forward({{prompt.data(), static_cast<size_t>(n_warm)}, {&warm, 1}}, kv, pool);

  if (f.prefill_depth > 0) {
    BatchSequence context{0, f.prefill_depth, 0, block_table, false};
    (void)model.forward({{prompt.data(), static_cast<size_t>(f.prefill_depth)}, {&context, 1}}, kv, pool);
  }
  ModelSpeed speed;
  BatchSequence seq{0, f.prompt_tokens, f.prefill_depth, block_table, true};
  std::span<const float> logits;
  std::vector<std::pair<double, double>> passes;  // (wall, CPU) seconds of each timed pass
  for (int32_t r = 0; r < f.repetitions; ++r) {
    const auto start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    logits =
        model.forward({{prompt.data() + f.prefill_depth, static_cast<size_t>(f.prompt_tokens)}, {&seq, 1}}, kv, pool);
    passes.emplace_back(seconds_since(start), process_cpu_seconds() - cpu_start);
  }
  std::sort(passes.begin(), passes.end());
  std::tie(speed.prefill_s, speed.prefill_cpu_s) = passes[passes.size() / 2];
  const int32_t decode_start = decode_start_of(f);
  if (f.depth > 0) {
    BatchSequence context{0, f.depth, 0, block_table, true};
    logits = model.forward({{prompt.data(), static_cast<size_t>(f.depth)}, {&context, 1}}, kv, pool);
  }
  TokenId next{static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
  const PoolWaits waits_start = pool.waits();
  const long switches_start = involuntary_switches();
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (int32_t i = 0; i < f.decode_tokens; ++i) {
    BatchSequence step{0, 1, decode_start + i, block_table, true};
    logits = model.forward({{&next, 1}, {&step, 1}}, kv, pool);
    next = TokenId{static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
  }
  speed.decode_s = seconds_since(start);
  speed.decode_cpu_s = process_cpu_seconds() - cpu_start;
  const PoolWaits waits_end = pool.waits();
  speed.decode_waits = {waits_end.calls - waits_start.calls, waits_end.wait_ns - waits_start.wait_ns,
                        waits_end.long_waits - waits_start.long_waits,
                        waits_end.long_wait_ns - waits_start.long_wait_ns};
  speed.decode_preemptions = involuntary_switches() - switches_start;
  speed.prefill_tok_s = f.prompt_tokens / speed.prefill_s;
  speed.decode_tok_s = f.decode_tokens / std::max(speed.decode_s, 1e-12);
  return speed;
}

struct MachineLimits {
  double bandwidth = 0;  // bytes/s
  double sgemm = 0;      // FLOP/s
};

MachineLimits measure_limits(ThreadPool& pool, int64_t bandwidth_mib) {
  return {measure_read_bandwidth(pool, static_cast<size_t>(bandwidth_mib) << 20, 5),
          measure_sgemm_flops(1024, pool.num_threads(), 5)};
}

int run_bench_model(const BenchModelFlags& f) {
  if (f.prompt_tokens < 1 || f.decode_tokens < 0 || f.depth < 0 || f.prefill_depth < 0 || f.repetitions < 1) {
    return std::fprintf(stderr, "error: need -p >= 1, -n >= 0, --depth >= 0, --prefill-depth >= 0, -r >= 1\n"), 1;
  }
  // The limits are measured right before and right after the model: on a shared machine they drift within a
  // minute, and the pair shows by how much. Fractions use their mean. The first pair comes before the model is
  // loaded: a bandwidth buffer touched and freed after the weights were packed slowed the model's decode that
  // followed, a cost no peer pays (docs/performance-log.md has the runs).
  ThreadPool pool(f.threads);
  const MachineLimits before = measure_limits(pool, f.bandwidth_mib);
  const bool rss_reset = reset_peak_rss();  // forget the bandwidth buffer, so peak RSS is the model's
  auto loaded = load_model_file(f.model_path);
  if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  Model& model = *loaded->model;
  if (model.config().encoder) {
    return std::fprintf(stderr, "error: %s is an encoder (%s): bench model times generation\n", f.model_path.c_str(),
                        model.config().architecture.c_str()),
           1;
  }
  const int32_t n_positions = positions_of(f);
  if (n_positions > model.config().n_ctx_train) {
    std::fprintf(stderr,
                 "note: max(--prefill-depth + -p, --depth) + -n = %d exceeds the trained context %d (speed is still "
                 "meaningful)\n",
                 n_positions, model.config().n_ctx_train);
  }
  const WeightTotals weights = weight_totals(*loaded->file);
  const ModelSpeed speed = measure_model(model, *loaded->tokenizer, f, pool);
  const size_t rss = peak_rss_bytes();  // before the second bandwidth buffer inflates it
  const MachineLimits after = measure_limits(pool, f.bandwidth_mib);
  const double bandwidth = 0.5 * (before.bandwidth + after.bandwidth);
  const double sgemm = 0.5 * (before.sgemm + after.sgemm);
  const double decode_fraction = weights.bytes_per_token * speed.decode_tok_s / bandwidth;
  const double prefill_fraction = 2.0 * weights.params * speed.prefill_tok_s / sgemm;
  if (f.json) {
    // A fraction of a limit that was not measured (--bandwidth-mib 0) is null: JSON has no inf or nan.
    const auto fraction_json = [](double x) {
      char text[32] = "null";
      if (std::isfinite(x)) std::snprintf(text, sizeof text, "%.4f", x);
      return std::string(text);
    };
    std::printf(
        "{\"model\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"decode_tokens\":%d,\"depth\":%d,"
        "\"prefill_depth\":%d,\"repetitions\":%d,\"prefill_s\":%.6f,\"params\":%.0f,"
        "\"weight_bytes_per_token\":%.0f,\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"peak_rss_bytes\":%zu,"
        "\"peak_rss_includes_bandwidth_buffer\":%s,\"read_bandwidth_bytes_s\":[%.0f,%.0f],\"sgemm_flops\":[%.0f,%.0f],"
        "\"decode_fraction_of_bandwidth\":%s,\"prefill_fraction_of_sgemm\":%s,\"prefill_cpu_s\":%.3f,"
        "\"decode_cpu_s\":%.3f,\"decode_pool_calls\":%llu,\"decode_pool_wait_s\":%.6f,"
        "\"decode_pool_long_waits\":%llu,\"decode_pool_long_wait_s\":%.6f,\"decode_involuntary_switches\":%ld,"
        "\"isa\":\"%s\",\"packed_bytes\":%zu,\"decode_prefetch\":\"%s\"}\n",
        f.model_path.c_str(), pool.num_threads(), f.prompt_tokens, f.decode_tokens, f.depth, f.prefill_depth,
        f.repetitions, speed.prefill_s, weights.params, weights.bytes_per_token, speed.prefill_tok_s,
        speed.decode_tok_s, rss, rss_reset ? "false" : "true", before.bandwidth, after.bandwidth, before.sgemm,
        after.sgemm, fraction_json(decode_fraction).c_str(), fraction_json(prefill_fraction).c_str(),
        speed.prefill_cpu_s, speed.decode_cpu_s, static_cast<unsigned long long>(speed.decode_waits.calls),
        speed.decode_waits.wait_ns * 1e-9, static_cast<unsigned long long>(speed.decode_waits.long_waits),
        speed.decode_waits.long_wait_ns * 1e-9, speed.decode_preemptions, Model::kernel_isa(), model.packed_bytes(),
        Model::kernel_decode_prefetch());
    return 0;
  }
  std::printf("model     %s: %.1fM matmul parameters, %.1f MB weights read per token, %d threads\n",
              f.model_path.c_str(), weights.params / 1e6, weights.bytes_per_token / 1e6, pool.num_threads());
  std::string pass = "in one pass";
  if (f.prefill_depth > 0) pass += " after " + std::to_string(f.prefill_depth) + " cached tokens";
  if (f.repetitions > 1) pass += ", median of " + std::to_string(f.repetitions);
  std::printf("prefill   %d tokens %s: %.1f ms (CPU %.1f ms), %.1f tok/s = %.1f GFLOP/s\n", f.prompt_tokens,
              pass.c_str(), speed.prefill_s * 1e3, speed.prefill_cpu_s * 1e3, speed.prefill_tok_s,
              2.0 * weights.params * speed.prefill_tok_s / 1e9);
  std::printf("decode    %d steps after %d tokens: %.2f s (CPU %.2f s), %.2f tok/s = %.1f GB/s of weights\n",
              f.decode_tokens, decode_start_of(f), speed.decode_s, speed.decode_cpu_s, speed.decode_tok_s,
              weights.bytes_per_token * speed.decode_tok_s / 1e9);
  if (speed.decode_waits.calls > 0) {
    const PoolWaits& w = speed.decode_waits;
    const double decode_ns = std::max(speed.decode_s, 1e-12) * 1e9;
    std::printf(
        "waits     decode: %llu pool calls waited %.1f ms (%.1f%% of the decode) at their ends for the last part, "
        "%.1f ms (%.1f%%) of it in %llu waits over 1 ms (a thread off its core); %ld involuntary context switches\n",
        static_cast<unsigned long long>(w.calls), w.wait_ns * 1e-6, 100.0 * w.wait_ns / decode_ns,
        w.long_wait_ns * 1e-6, 100.0 * w.long_wait_ns / decode_ns, static_cast<unsigned long long>(w.long_waits),
        speed.decode_preemptions);
  }
  std::printf(
      "kernels   %s; %.1f MiB of weights packed for the packed tiles (resident beside the mapped file); decode "
      "prefetch %s\n",
      Model::kernel_isa(), model.packed_bytes() / 1048576.0, Model::kernel_decode_prefetch());
  std::printf("peak RSS  %.1f MiB (model file %.1f MiB)%s\n", rss / 1048576.0, loaded->file->file_size() / 1048576.0,
              rss_reset ? "" : " (includes the bandwidth buffer: could not reset VmHWM)");
  std::printf(
      "machine   read bandwidth %.1f / %.1f GB/s (before / after, %lld MiB buffer), sgemm 1024^3 %.1f / %.1f "
      "GFLOP/s (OpenBLAS)\n",
      before.bandwidth / 1e9, after.bandwidth / 1e9, static_cast<long long>(f.bandwidth_mib), before.sgemm / 1e9,
      after.sgemm / 1e9);
  std::printf("fraction  decode %.3f of bandwidth, prefill %.3f of sgemm (against the mean of before and after)\n",
              decode_fraction, prefill_fraction);
  if (weights.bytes_per_token < 64.0 * 1024 * 1024) {
    std::printf("note      the weights fit in cache, so decode can exceed the DRAM bandwidth fraction of 1\n");
  }
  return 0;
}

}  // namespace

Command add_bench_model(CLI::App& app) {
  auto flags = std::make_shared<BenchModelFlags>();
  app.add_option("-m,--model", flags->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt-tokens", flags->prompt_tokens, "Prompt tokens prefilled in one pass")
      ->capture_default_str();
  app.add_option("-n,--decode-tokens", flags->decode_tokens, "Single-token decode steps")->capture_default_str();
  app.add_option("--depth", flags->depth,
                 "Decode after an untimed prompt of this many tokens instead of after the -p prompt (0: after -p)")
      ->capture_default_str();
  app.add_option("--prefill-depth", flags->prefill_depth,
                 "Prefill the -p prompt after an untimed context of this many tokens, as a chat's later turn follows "
                 "its cached history (attention reads them); 0: from position 0")
      ->capture_default_str();
  app.add_option("-r,--repetitions", flags->repetitions,
                 "Time the -p prompt's pass this many times over the same positions and report the median")
      ->capture_default_str();
  app.add_option("-t,--threads", flags->threads, "Threads; 0 uses every core")->capture_default_str();
  app.add_option("--bandwidth-mib", flags->bandwidth_mib, "Buffer for the read-bandwidth measurement (MiB)")
      ->capture_default_str();
  app.add_option("--kv-dtype", flags->kv_dtype, "KV dtype of the run")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0"}))
      ->capture_default_str();
  app.add_flag("--json", flags->json, "One JSON object instead of text");
  return [flags] { return run_bench_model(*flags); };
}

}  // namespace hearth::app

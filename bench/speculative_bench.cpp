// hearth-bench-speculative: decode tokens/s with speculative decoding (prompt lookup) against plain decoding, on
//   1. a workload whose output repeats its input: the model's own greedy text fed back as the prompt, followed by
//      its opening again, so the continuation quotes it (high acceptance);
//   2. a workload that never repeats: seeded sampling at temperature 1.5 over the whole vocabulary (acceptance near
//      0), where auto must switch drafting off and be no slower than plain.
// Each also runs with plain decoding's own answer as the request's predicted output: the target as its own drafter,
// every draft accepted, the ceiling of what verifying k tokens per pass gives on this model and machine.
// Every mode decodes the same request; the outputs are checked to be identical token for token. Decode time is
// the time of the steps that compute no prompt token. Rounds alternate the modes; the best round of each counts.
//
//   hearth-bench-speculative -m MODEL.gguf [--tokens 256] [--rounds 3] [-t 2]

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
  int32_t tokens = 256;
  int32_t rounds = 3;
  int32_t max_draft = 8;
  int threads = 0;
};

struct Result {
  double tok_s = 0;
  std::vector<TokenId> output;
  uint64_t drafted = 0, accepted = 0, steps = 0;
};

Result decode(Model& model, const Tokenizer& tok, ThreadPool& pool, RequestSpec spec, SpeculativeMode mode,
              int32_t max_draft) {
  EngineConfig config;
  config.kv_memory_bytes = 256ll << 20;
  config.speculative.mode = mode;
  config.speculative.max_draft = max_draft;
  auto engine = *Engine::create(model, tok, config, pool);
  spec.use_cache = false;
  HEARTH_CHECK(engine->add_request(std::move(spec)).ok(), "request refused");
  Result r;
  double seconds = 0;
  int64_t n = 0;
  while (engine->has_unfinished()) {
    const uint64_t before = engine->counters().num_prefill_tokens;
    const auto start = Clock::now();
    auto outputs = engine->step();
    const double dt = std::chrono::duration<double>(Clock::now() - start).count();
    const bool prefill = engine->counters().num_prefill_tokens != before;
    for (RequestOutput& out : outputs) {
      r.output.insert(r.output.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (!prefill) n += static_cast<int64_t>(out.new_tokens.size());
    }
    if (!prefill) seconds += dt;
  }
  r.tok_s = static_cast<double>(n) / seconds;
  r.drafted = engine->stats().num_drafted_tokens;
  r.accepted = engine->stats().num_accepted_tokens;
  r.steps = engine->counters().num_steps;
  return r;
}

RequestSpec request(std::vector<TokenId> prompt, int32_t max_tokens, float temperature) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = temperature;
  spec.sampling.top_k = 0;
  spec.sampling.top_p = 1.0f;
  spec.sampling.seed = 1234;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  return spec;
}

// One way to decode: a speculative mode, and whether the request carries plain decoding's own answer as its
// predicted output (the target as its own drafter: every draft is accepted, which measures the verification
// mechanism's ceiling).
struct Variant {
  const char* name;
  SpeculativeMode mode;
  bool predicted;
};

void compare(const char* name, Model& model, const Tokenizer& tok, ThreadPool& pool, const RequestSpec& spec,
             const Flags& f) {
  const Variant variants[] = {{"off", SpeculativeMode::kOff, false},
                              {"prompt_lookup", SpeculativeMode::kPromptLookup, false},
                              {"auto", SpeculativeMode::kAuto, false},
                              {"predicted (100%)", SpeculativeMode::kOff, true}};
  constexpr int kVariants = std::size(variants);
  const std::vector<TokenId> answer = decode(model, tok, pool, spec, SpeculativeMode::kOff, f.max_draft).output;
  Result best[kVariants];
  for (int32_t round = 0; round < f.rounds; ++round) {
    for (int v = 0; v < kVariants; ++v) {
      RequestSpec s = spec;
      if (variants[v].predicted) s.prediction = answer;
      Result r = decode(model, tok, pool, std::move(s), variants[v].mode, f.max_draft);
      if (r.tok_s > best[v].tok_s) best[v] = std::move(r);
    }
  }
  std::printf("%s (%zu prompt tokens, %d generated):\n", name, spec.prompt.size(), spec.max_tokens.value_or(0));
  for (int v = 0; v < kVariants; ++v) {
    const Result& r = best[v];
    HEARTH_CHECK(r.output == answer, "{}: the output differs from plain decoding's", variants[v].name);
    std::printf("  %-17s %8.1f tok/s  %.2fx  steps %4llu  drafted %5llu  accepted %5llu (%.0f%%)\n", variants[v].name,
                r.tok_s, r.tok_s / best[0].tok_s, static_cast<unsigned long long>(r.steps),
                static_cast<unsigned long long>(r.drafted), static_cast<unsigned long long>(r.accepted),
                r.drafted ? 100.0 * static_cast<double>(r.accepted) / static_cast<double>(r.drafted) : 0.0);
  }
}

int run(const Flags& f) {
  auto loaded = load_model_file(f.model_path);
  if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  ThreadPool pool(f.threads);
  std::printf("model %s, %d threads, max_draft %d, best of %d rounds\n", f.model_path.c_str(), pool.num_threads(),
              f.max_draft, f.rounds);
  // The model's own greedy text, then its opening again: the continuation quotes the text.
  std::vector<TokenId> opening = tok.encode("Once upon a time", true, false);
  const int32_t room = std::min<int32_t>(model.config().n_ctx_train, 2048);
  const int32_t quoted = std::min(f.tokens, (room - 2 * static_cast<int32_t>(opening.size())) / 2 - 8);
  const Result first = decode(model, tok, pool, request(opening, quoted, 0.0f), SpeculativeMode::kOff, f.max_draft);
  std::vector<TokenId> prompt = opening;
  prompt.insert(prompt.end(), first.output.begin(), first.output.end());
  prompt.insert(prompt.end(), opening.begin() + 1, opening.end());
  compare("repeating (greedy, the prompt quoted)", model, tok, pool, request(prompt, quoted, 0.0f), f);
  std::mt19937 rng(7);
  std::vector<TokenId> random_prompt{tok.bos()};
  const auto body = random_normal_tokens(tok, 63, rng);
  random_prompt.insert(random_prompt.end(), body.begin(), body.end());
  compare("never repeating (temperature 1.5, seeded)", model, tok, pool, request(random_prompt, quoted, 1.5f), f);
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  hearth::Flags f;
  CLI::App app{"Speculative decoding (prompt lookup) against plain decoding: decode tokens/s, identical output"};
  app.add_option("-m,--model", f.model_path, "GGUF model")->required()->check(CLI::ExistingFile);
  app.add_option("--tokens", f.tokens, "Tokens generated per request")->capture_default_str();
  app.add_option("--rounds", f.rounds, "Rounds; the best of each mode counts")->capture_default_str();
  app.add_option("--max-draft", f.max_draft, "Drafted tokens per step at most")->capture_default_str();
  app.add_option("-t,--threads", f.threads, "Threads; 0 uses every core")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return hearth::run(f);
}

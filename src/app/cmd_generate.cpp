#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.h"
#include "engine/generate.h"
#include "model/loaded_model.h"
#include "util/log.h"

namespace hearth::app {
namespace {

struct GenerateFlags {
  std::string model_path;
  std::string prompt = "Once upon a time";
  int32_t n_predict = 64;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  int threads = 0;
  bool show_stats = false;
};

int run_generate(const GenerateFlags& f) {
  auto loaded = load_model_file(f.model_path);
  if (!loaded) {
    std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str());
    return 1;
  }
  ThreadPool pool(f.threads);
  GenerateOptions options;
  options.max_tokens = f.n_predict;
  options.sampling = {f.temperature, f.top_k, f.top_p, f.seed};
  std::fputs(f.prompt.c_str(), stdout);
  auto result = generate(*loaded->model, *loaded->tokenizer, f.prompt, options, pool, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  if (!result) {
    std::fprintf(stderr, "error: %s\n", result.error().message.c_str());
    return 1;
  }
  if (f.show_stats) {
    const size_t n_prompt = result->prompt_tokens.size();
    const size_t n_out = result->output_tokens.size();
    std::fprintf(stderr, "prompt %zu tokens in %.1f ms (%.1f tok/s), generated %zu tokens in %.1f ms (%.1f tok/s)\n",
                 n_prompt, result->prefill_ms, n_prompt * 1000.0 / std::max(result->prefill_ms, 1e-9), n_out,
                 result->decode_ms, n_out * 1000.0 / std::max(result->decode_ms, 1e-9));
  }
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  app.add_option("-m,--model", flags->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--prompt", flags->prompt, "Prompt text")->capture_default_str();
  app.add_option("-n,--n-predict", flags->n_predict, "Tokens to generate")->capture_default_str();
  app.add_option("--temp", flags->temperature, "Sampling temperature; 0 is greedy")->capture_default_str();
  app.add_option("--top-k", flags->top_k, "Top-k; 0 disables")->capture_default_str();
  app.add_option("--top-p", flags->top_p, "Top-p (nucleus); 1 disables")->capture_default_str();
  app.add_option("--seed", flags->seed, "RNG seed")->capture_default_str();
  app.add_option("-t,--threads", flags->threads, "Threads; 0 uses every core")->capture_default_str();
  app.add_flag("--stats", flags->show_stats, "Print prefill and decode speed to stderr");
  return [flags] { return run_generate(*flags); };
}

}  // namespace hearth::app

// hearth-bench-grammar: what constrained decoding costs per token: the time to compute one token mask
// (TokenMasker::compute) on real vocabularies, for a JSON schema, along random-logits decodes (the walk a real
// decode takes: structure, keys, strings, numbers). It also times applying the mask to a logits row, and the
// grammar's quick completion, which the engine computes at every constrained step to know when to wrap up
// (output_processor.h).
//
//   hearth-bench-grammar [--vocab ../shared/vocab/ggml-vocab-llama-bpe.gguf]... [--runs 20] [--schema FILE.json]
//
// Prints per vocabulary: steps measured, the mean / p50 / p95 / max mask time in ms, the share of steps inside a
// string's text (the fast path), the first output as a sample, and the output before the slowest mask.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer"},
    "email": {"type": "string"},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    "status": {"enum": ["active", "inactive", "banned"]},
    "verified": {"type": "boolean"}
  },
  "required": ["name", "age", "status"],
  "additionalProperties": false
})";

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int run(const std::string& vocab_path, const nlohmann::json& schema, int runs) {
  auto file = GgufFile::open(vocab_path);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) return std::fprintf(stderr, "%s\n", tokenizer.error().message.c_str()), 1;
  auto grammar = Grammar::from_json_schema(schema);
  if (!grammar) return std::fprintf(stderr, "%s\n", grammar.error().message.c_str()), 1;
  const auto t0 = Clock::now();
  const VocabBytes vocab(*tokenizer);
  const double index_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  TokenMasker masker;
  std::vector<uint8_t> allowed;
  std::vector<float> logits(static_cast<size_t>(vocab.vocab_size()));
  std::vector<float> masked(logits.size());
  const std::vector<TokenId> stops = {tokenizer->eos()};
  std::vector<double> mask_ms;
  std::vector<double> apply_ms;
  std::vector<double> completion_ms;
  size_t longest_completion = 0;
  int64_t string_steps = 0;
  std::string sample;
  std::string slowest_after;  // the output before the slowest mask
  double slowest = -1;
  for (int r = 0; r < runs; ++r) {
    std::mt19937 rng(static_cast<uint32_t>(r));
    std::uniform_real_distribution<float> logit(0.f, 1.f);
    GrammarState state = grammar->start();
    std::string out;
    for (int step = 0; step < 300 && !Grammar::is_terminal(state); ++step) {
      int32_t room = 0;
      string_steps += grammar->in_plain_string(state, &room) ? 1 : 0;
      const auto a = Clock::now();
      const int32_t n = masker.compute(*grammar, state, vocab, stops, allowed);
      const auto b = Clock::now();
      for (float& x : logits) x = logit(rng);
      const auto c = Clock::now();
      constexpr float kMasked = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i < logits.size(); ++i) masked[i] = allowed[i] ? logits[i] : kMasked;
      const auto d = Clock::now();
      const std::optional<std::string> rest = grammar->quick_completion(state, 4096);
      const auto e = Clock::now();
      completion_ms.push_back(std::chrono::duration<double, std::milli>(e - d).count());
      longest_completion = std::max(longest_completion, rest ? rest->size() : 0);
      mask_ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
      if (mask_ms.back() > slowest) {
        slowest = mask_ms.back();
        slowest_after = out;
      }
      apply_ms.push_back(std::chrono::duration<double, std::milli>(d - c).count());
      if (n == 0) break;
      const auto best = static_cast<int32_t>(std::max_element(masked.begin(), masked.end()) - masked.begin());
      if (TokenId{best} == tokenizer->eos()) break;
      if (!grammar->advance(state, vocab.piece(TokenId{best}))) return std::fprintf(stderr, "mask broken\n"), 1;
      out += vocab.piece(TokenId{best});
    }
    if (r == 0) sample = out;
  }
  double sum = 0;
  for (double x : mask_ms) sum += x;
  double apply_sum = 0;
  for (double x : apply_ms) apply_sum += x;
  std::printf("%s: vocab %d, index %.1f ms, %zu steps (%.0f%% inside string text)\n", vocab_path.c_str(),
              vocab.vocab_size(), index_ms, mask_ms.size(),
              100.0 * static_cast<double>(string_steps) / static_cast<double>(mask_ms.size()));
  std::printf("  mask ms/token: mean %.3f  p50 %.3f  p95 %.3f  max %.3f;  applying it to a logits row: mean %.3f\n",
              sum / static_cast<double>(mask_ms.size()), percentile(mask_ms, 0.5), percentile(mask_ms, 0.95),
              percentile(mask_ms, 1.0), apply_sum / static_cast<double>(apply_ms.size()));
  double completion_sum = 0;
  for (double x : completion_ms) completion_sum += x;
  std::printf("  quick completion ms/token: mean %.4f  p95 %.4f  max %.4f (longest %zu bytes)\n",
              completion_sum / static_cast<double>(completion_ms.size()), percentile(completion_ms, 0.95),
              percentile(completion_ms, 1.0), longest_completion);
  std::printf("  sample output: %s\n  slowest mask after: %s\n", sample.c_str(), slowest_after.c_str());
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  CLI::App app{"hearth-bench-grammar: the per-token cost of constrained decoding"};
  std::vector<std::string> vocabs;
  std::string schema_path;
  int runs = 20;
  app.add_option("--vocab", vocabs, "vocabulary GGUF files (repeatable)");
  app.add_option("--schema", schema_path, "a JSON schema file (default: a 7-property object)");
  app.add_option("--runs", runs, "random-logits decodes per vocabulary")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  if (vocabs.empty()) {
    vocabs = {"../shared/vocab/ggml-vocab-llama-bpe.gguf", "../shared/vocab/ggml-vocab-qwen2.gguf"};
  }
  nlohmann::json schema = nlohmann::json::parse(hearth::kDefaultSchema);
  if (!schema_path.empty()) {
    std::ifstream in(schema_path);
    std::stringstream ss;
    ss << in.rdbuf();
    schema = nlohmann::json::parse(ss.str(), nullptr, false);
    if (schema.is_discarded()) return std::fprintf(stderr, "%s is not JSON\n", schema_path.c_str()), 1;
  }
  for (const std::string& v : vocabs) {
    if (int rc = hearth::run(v, schema, runs); rc != 0) return rc;
  }
  return 0;
}

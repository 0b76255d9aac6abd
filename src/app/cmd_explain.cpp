// hearth explain: where two prompts diverge as the prefix cache sees them, offline (tokenizer only).

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "app/commands.h"
#include "engine/explain.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

namespace hearth::app {
namespace {

struct ExplainFlags {
  std::string model_path;
  std::string a_path;
  std::string b_path;
  int32_t block_size = 16;
  bool json = false;
};

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json comparison_json(const PromptComparison& c, const ExplainFlags& f) {
  nlohmann::json j = {
      {"a", {{"file", f.a_path}, {"tokens", c.a_tokens}}},
      {"b", {{"file", f.b_path}, {"tokens", c.b_tokens}}},
      {"block_size", c.block_size},
      {"identical", c.identical},
      {"divergence_token", c.divergence},
      {"divergence_block", c.divergence_block},
      {"reusable_tokens", c.reusable_tokens},
      {"shared_full_blocks", c.shared_full_blocks},
      {"shared_partial_tokens", c.shared_partial_tokens},
      {"computed_tokens", c.b_tokens - c.reusable_tokens},
      {"context_text", c.context_text},
      {"a_text", c.a_text},
      {"b_text", c.b_text},
      {"realignment", nullptr},
  };
  if (c.realignment) {
    j["realignment"] = {{"b_token", c.realignment->a_begin},
                        {"a_token", c.realignment->b_begin},
                        {"tokens", c.realignment->run},
                        {"volatile_region_tokens", c.realignment->a_begin - c.divergence}};
  }
  return j;
}

void print_comparison(const PromptComparison& c, const ExplainFlags& f) {
  const nlohmann::json quote = nlohmann::json::array({c.context_text, c.a_text, c.b_text});
  auto q = [&](size_t i) { return quote[i].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  std::printf("A %s: %d tokens\nB %s: %d tokens\nblock size %d\n", f.a_path.c_str(), c.a_tokens, f.b_path.c_str(),
              c.b_tokens, c.block_size);
  if (c.identical) {
    std::printf("identical: B reuses %d of %d tokens (its last token is always computed)\n", c.reusable_tokens,
                c.b_tokens);
    return;
  }
  std::printf("diverge at token %d (block %d, slot %d)\n", c.divergence, c.divergence_block,
              c.divergence % c.block_size);
  std::printf("B after A reuses %d tokens (%d full blocks + %d copied from a partial block) and computes %d\n",
              c.reusable_tokens, c.shared_full_blocks, c.shared_partial_tokens, c.b_tokens - c.reusable_tokens);
  std::printf("before: %s\nA:      %s\nB:      %s\n", q(0).c_str(), q(1).c_str(), q(2).c_str());
  if (c.realignment) {
    std::printf("after %d differing tokens of B (%d of A) they agree again for %d tokens (B token %d, A token %d): "
                "a volatile region that costs %d recomputed tokens\n",
                c.realignment->a_begin - c.divergence, c.realignment->b_begin - c.divergence, c.realignment->run,
                c.realignment->a_begin, c.realignment->b_begin, c.realignment->run);
  }
}

int run_explain(const ExplainFlags& f) {
  auto file = GgufFile::open(f.model_path);
  if (!file) {
    std::fprintf(stderr, "error: %s\n", file.error().message.c_str());
    return 1;
  }
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) {
    std::fprintf(stderr, "error: %s: %s\n", f.model_path.c_str(), tokenizer.error().message.c_str());
    return 1;
  }
  auto a = read_text(f.a_path);
  auto b = read_text(f.b_path);
  if (!a || !b) {
    std::fprintf(stderr, "error: %s\n", (!a ? a.error() : b.error()).message.c_str());
    return 1;
  }
  const auto a_tokens = tokenizer->encode(*a, /*add_special=*/true);
  const auto b_tokens = tokenizer->encode(*b, /*add_special=*/true);
  const PromptComparison c = compare_prompts(*tokenizer, a_tokens, b_tokens, f.block_size);
  if (f.json) {
    std::puts(comparison_json(c, f).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_comparison(c, f);
  }
  return 0;
}

}  // namespace

Command add_explain(CLI::App& app) {
  auto flags = std::make_shared<ExplainFlags>();
  app.add_option("-m,--model", flags->model_path, "GGUF model file (only its tokenizer is read)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("a", flags->a_path, "First prompt (text file), the one cached first")->required();
  app.add_option("b", flags->b_path, "Second prompt (text file)")->required();
  app.add_option("--block-size", flags->block_size, "Tokens per KV block (as hearth serve)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--json", flags->json, "Print JSON");
  return [flags] { return run_explain(*flags); };
}

}  // namespace hearth::app

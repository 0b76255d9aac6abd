// hearth-bench-tokenizer: what encoding a household's prompt costs. Every request re-encodes its whole rendered
// history (the server cannot know which part of the text it has seen), so a later turn of a long chat pays for
// thousands of tokens of encoding before its first new token is computed.
//
//   hearth-bench-tokenizer [--vocab ../shared/vocab/ggml-vocab-llama-spm.gguf]... [--lines 200] [--runs 20]
//
// The text is a chat history in the server's plain fallback rendering ("User: ...\nAssistant: ...\n"), lines of
// 6-30 words drawn from a fixed word list with a fixed seed, so every run encodes the same text. Prints per
// vocabulary: bytes, tokens, the median and minimum time of one encode, ns per byte, and the median of the unsplit
// reference encode (Tokenizer::encode_unsplit, the same tokens) run alternately, with its ratio to encode.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

std::string household_history(int lines) {
  static const char* const kWords[] = {
      "the",     "kitchen", "light",   "is",     "on",      "please", "turn",   "off",     "heating", "at",
      "seven",   "o'clock", "remind",  "me",     "to",      "buy",    "milk",   "and",     "bread",   "tomorrow",
      "what's",  "weather", "like",    "in",     "Zürich",  "today?", "family", "calendar", "dentist", "Tuesday,",
      "homework", "math",   "chapter", "3.2",    "—",       "garden", "water",  "plants",  "12°C",    "door",
      "locked.", "who",     "left",    "garage", "open",    "dinner", "recipe", "pasta",   "with",    "tomatoes"};
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> word(0, static_cast<int>(std::size(kWords)) - 1);
  std::uniform_int_distribution<int> length(6, 30);
  std::string text = "You are the household assistant. Answer briefly and kindly.\n\n";
  for (int line = 0; line < lines; ++line) {
    text += line % 2 == 0 ? "User:" : "Assistant:";
    for (int w = length(rng); w > 0; --w) {
      text += ' ';
      text += kWords[word(rng)];
    }
    text += '\n';
  }
  return text;
}

int run(const std::string& vocab_path, const std::string& text, int runs) {
  auto file = GgufFile::open(vocab_path);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) return std::fprintf(stderr, "%s\n", tokenizer.error().message.c_str()), 1;
  // encode() and its unsplit reference twin alternate, so the ratio between them is measured side by side.
  std::vector<TokenId> split;
  std::vector<TokenId> unsplit;
  std::vector<double> split_us;
  std::vector<double> unsplit_us;
  for (int r = 0; r < runs; ++r) {
    auto start = Clock::now();
    split = tokenizer->encode(text, /*add_special=*/true);
    split_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    start = Clock::now();
    unsplit = tokenizer->encode_unsplit(text, /*add_special=*/true);
    unsplit_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  if (split != unsplit) return std::fprintf(stderr, "%s: encode and encode_unsplit differ\n", vocab_path.c_str()), 1;
  std::sort(split_us.begin(), split_us.end());
  std::sort(unsplit_us.begin(), unsplit_us.end());
  const double median = split_us[split_us.size() / 2];
  const double unsplit_median = unsplit_us[unsplit_us.size() / 2];
  std::printf("%-44s %7zu bytes %6zu tokens  encode median %8.1f us (min %8.1f, %6.1f ns/byte)  unsplit %8.1f us"
              "  (%.2fx)\n",
              vocab_path.c_str(), text.size(), split.size(), median, split_us.front(),
              1000.0 * median / static_cast<double>(text.size()), unsplit_median, unsplit_median / median);
  return 0;
}

}  // namespace
}  // namespace hearth

int main(int argc, char** argv) {
  CLI::App app{"hearth-bench-tokenizer: the time to encode a household's chat history"};
  std::vector<std::string> vocabs;
  int lines = 200;
  int runs = 20;
  app.add_option("--vocab", vocabs, "vocabulary GGUF files (repeatable)");
  app.add_option("--lines", lines, "chat lines in the history")->check(CLI::Range(1, 100000));
  app.add_option("--runs", runs, "encodes per vocabulary")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  if (vocabs.empty()) {
    vocabs = {"../shared/vocab/ggml-vocab-llama-spm.gguf", "../shared/vocab/ggml-vocab-llama-bpe.gguf",
              "../shared/vocab/ggml-vocab-qwen2.gguf", "../shared/vocab/ggml-vocab-gemma3.gguf"};
  }
  const std::string text = hearth::household_history(lines);
  for (const std::string& v : vocabs) {
    if (int rc = hearth::run(v, text, runs); rc != 0) return rc;
  }
  return 0;
}

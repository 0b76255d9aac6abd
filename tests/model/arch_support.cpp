#include "arch_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "model/model.h"
#include "tensor/kv_dtype.h"
#include "tokenizer/tokenizer.h"

namespace hearth::test {
namespace {

namespace fs = std::filesystem;

// Runs `command`, returns its stdout.
std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  pclose(pipe);
  return out;
}

std::vector<int32_t> ids_of(const std::vector<TokenId>& tokens) {
  std::vector<int32_t> out;
  for (TokenId t : tokens) out.push_back(t.value);
  return out;
}

}  // namespace

std::vector<std::vector<float>> engine_logits(const std::shared_ptr<const GgufFile>& file,
                                              const std::vector<int32_t>& tokens) {
  auto model = Model::load(file);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  const ModelConfig& c = (*model)->config();
  const int32_t n = static_cast<int32_t>(tokens.size());
  KvStorage kv(c.kv_shape(), 16, (n + 15) / 16);
  if (c.is_hybrid()) kv.reserve_state_slots(1, c.recurrent_state_floats());
  std::vector<BlockId> table;
  for (int32_t b = 0; b < kv.num_blocks(); ++b) table.push_back(BlockId{b});
  ThreadPool pool(2);
  std::vector<std::vector<float>> out;
  for (int32_t pos = 0; pos < n; ++pos) {
    const TokenId token{tokens[pos]};
    const BatchSequence seq{0, 1, pos, table, true};
    auto logits = (*model)->forward({{&token, 1}, {&seq, 1}}, kv, pool);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

double max_relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0, scale = 0.0;
  for (size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].size(), b[t].size());
    for (size_t i = 0; i < std::min(a[t].size(), b[t].size()); ++i) {
      diff = std::max(diff, std::abs(static_cast<double>(a[t][i]) - b[t][i]));
      scale = std::max(scale, std::abs(static_cast<double>(b[t][i])));
    }
  }
  return diff / scale;
}

Greedy hearth_greedy(const std::string& path) {
  auto opened = GgufFile::open(path);
  EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : opened.error().message);
  if (!opened.ok()) return {};
  const auto file = std::make_shared<const GgufFile>(std::move(*opened));
  auto model = Model::load(file);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  auto tokenizer = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tokenizer.ok()) << (tokenizer.ok() ? "" : tokenizer.error().message);
  if (!model.ok() || !tokenizer.ok()) return {};
  ThreadPool pool(2);
  GenerateOptions options;
  options.max_tokens = kPeerGreedyTokens;
  options.sampling.temperature = 0.0f;
  options.stop_at_eos = false;
  options.kv_format = {KvDtype::kF16, KvDtype::kF16};
  auto result = generate(**model, *tokenizer, kPeerPrompt, options, pool);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
  if (!result.ok()) return {};
  return {ids_of(result->prompt_tokens), ids_of(result->output_tokens), result->text};
}

Greedy peer_greedy(const std::string& path) {
  const std::string peer_dir = HEARTH_PEER_DIR;
  const std::string installed = peer_dir + "/node_modules/@node-llama-cpp/linux-x64/bins";
  EXPECT_TRUE(fs::exists(installed)) << "the peer is not installed in " << peer_dir << ": run scripts/peer-install.sh";
  if (!fs::exists(installed)) return {};
  const std::string log = path + ".peer.log";
  const std::string command = "node '" + peer_dir + "/greedy.mjs' --model '" + path + "' --prompt '" + kPeerPrompt +
                              "' -n " + std::to_string(kPeerGreedyTokens) + " --ctx 256 -t 1 2>'" + log + "'";
  const std::string out = run_command(command);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << command << "\nprinted: " << out << "\n(stderr in " << log << ")";
  if (!j.is_object()) return {};
  Greedy g;
  for (const auto& id : j.at("prompt_ids")) g.prompt_ids.push_back(id.get<int32_t>());
  for (const auto& id : j.at("ids")) g.ids.push_back(id.get<int32_t>());
  g.text = j.at("text").get<std::string>();
  return g;
}

void expect_greedy_matches_peer(const std::string& path, const std::string& what) {
  const Greedy ours = hearth_greedy(path);
  const Greedy theirs = peer_greedy(path);
  ASSERT_EQ(ours.ids.size(), static_cast<size_t>(kPeerGreedyTokens)) << what;
  EXPECT_EQ(ours.prompt_ids, theirs.prompt_ids) << what << ": the prompt tokenizes differently";
  EXPECT_EQ(ours.ids, theirs.ids) << what << ": greedy token ids differ from llama.cpp v0.5.0's";
  EXPECT_EQ(ours.text, theirs.text) << what << ": greedy text differs from llama.cpp v0.5.0's";
}

}  // namespace hearth::test

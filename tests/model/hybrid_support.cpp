#include "hybrid_support.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include "model/model.h"
#include "model/synth.h"
#include "tmp_files.h"

namespace hearth::test {
namespace {

namespace fs = std::filesystem;

const std::vector<int32_t> kQwenTokens = {9707, 11, 1879, 0, 151643, 42, 1000, 77777, 123, 5, 151000, 220, 13, 3};

SynthConfig hybrid_config(const std::string& architecture, DType weight_type, uint64_t seed) {
  SynthConfig c;
  c.vocab_from = std::string(HEARTH_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf";
  c.architecture = architecture;
  c.name = "hearth-synthetic-" + architecture;
  c.dim = 64;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 32;
  c.ffn_dim = 128;
  if (architecture != "qwen35") {
    c.ffn_dim = 64;  // the shared expert's
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.expert_ffn_dim = 32;
    c.router_sd = 0.5f;
  }
  c.context_length = 256;
  c.weight_type = weight_type;
  c.weight_sd = 0.1f;
  c.bias_sd = 0.5f;
  c.qk_norm_sd = 0.3f;
  c.rope_freq_base = 1000000.0f;
  c.seed = seed;
  c.num_threads = 2;
  return c;
}

}  // namespace

const std::string& hybrid_model(const std::string& architecture, DType weight_type, uint64_t seed,
                                int64_t nextn_layers) {
  static std::map<std::tuple<std::string, DType, uint64_t, int64_t>, std::string> paths;
  auto [it, inserted] = paths.try_emplace({architecture, weight_type, seed, nextn_layers});
  if (!inserted) return it->second;
  SynthConfig c = hybrid_config(architecture, weight_type, seed);
  c.nextn_layers = nextn_layers;
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  c.out_path =
      remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/hybrid_" + architecture + "_" +
                     std::string(dtype_name(weight_type)) + "_" + std::to_string(getpid()) + "_" +
                     std::to_string(seed) + (nextn_layers > 0 ? "_mtp" + std::to_string(nextn_layers) : "") + ".gguf");
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  it->second = c.out_path;
  return it->second;
}

std::shared_ptr<const GgufFile> open_file(const std::string& path) {
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  return std::make_shared<const GgufFile>(std::move(*file));
}

std::vector<int32_t> sample_tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back((kQwenTokens[(i + seed) % kQwenTokens.size()] + i / 16 + seed) % 151000);
  }
  return out;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << ": hit differs from cold";
}

void expect_same_bits_whatever_the_chunking(const std::string& architecture, DType weight_type) {
  auto model = Model::load(open_file(hybrid_model(architecture, weight_type)));
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  std::vector<TokenId> ids;
  for (int32_t i = 0; i < 60; ++i) ids.push_back(TokenId{(kQwenTokens[i % kQwenTokens.size()] + i / 14) % c.n_vocab});
  ThreadPool pool(2);
  const std::vector<BlockId> table = {BlockId{0}, BlockId{1}, BlockId{2}, BlockId{3}};
  auto run = [&](int32_t chunk, std::vector<float>& state) {
    KvStorage kv(c.kv_shape(), 16, 4);
    kv.reserve_state_slots(1, c.recurrent_state_floats());
    std::vector<float> logits;
    for (int32_t pos = 0; pos < 60; pos += chunk) {
      const int32_t n = std::min(chunk, 60 - pos);
      const std::vector<TokenId> batch(ids.begin() + pos, ids.begin() + pos + n);
      const BatchSequence seq{
          .first_row = 0, .n_tokens = n, .pos_begin = pos, .block_table = table, .want_logits = true};
      const auto out = (*model)->forward({batch, {&seq, 1}}, kv, pool);
      logits.assign(out.begin(), out.end());
    }
    state.assign(kv.state_slot(0), kv.state_slot(0) + kv.state_floats_per_slot());
    return logits;
  };
  std::vector<float> whole_state, state;
  const std::vector<float> whole = run(60, whole_state);
  ASSERT_EQ(whole.size(), static_cast<size_t>(c.n_vocab));
  for (int32_t chunk : {1, 7}) {
    const std::vector<float> logits = run(chunk, state);
    EXPECT_EQ(std::memcmp(logits.data(), whole.data(), whole.size() * sizeof(float)), 0)
        << architecture << " " << dtype_name(weight_type) << " " << chunk;
    EXPECT_EQ(std::memcmp(state.data(), whole_state.data(), whole_state.size() * sizeof(float)), 0)
        << architecture << " " << dtype_name(weight_type) << " " << chunk;
  }
}

}  // namespace hearth::test

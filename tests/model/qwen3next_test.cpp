// qwen3next (Qwen3-Next: qwen35moe's hybrid layers and FFN with llama.cpp's older DeltaNet tensors, ssm_in holding
// q, k, v and z and ssm_ba beta and alpha, interleaved per key head, and value head h reading key head h / (n_v /
// n_k)), proven as qwen35moe_test.cpp proves qwen35moe, on tiny synthetic files with Qwen's vocabulary: (a) the
// engine's logits agree with the plain scalar forward (reference_forward.cpp), and reading the fused tensors as whole
// q|k|v|z blocks, or the key heads tiled as qwen35's, moves them far beyond the tolerance; (b) a token's bits do not
// depend on the batch or the chunking; (c) Hearth's greedy token ids and text equal llama.cpp v0.5.0's. Its
// prefix-cache hits are hybrid_cache_test.cpp's, run on every hybrid family; its file is hybrid_support.h's.

#include <gtest/gtest.h>

#include "arch_support.h"
#include "hybrid_support.h"
#include "model/model.h"
#include "reference_forward.h"

namespace hearth {
namespace {

const std::vector<int32_t> kQwenTokens = {9707, 11, 1879, 0, 151643, 42, 1000, 77777, 123, 5, 151000, 220, 13, 3};
constexpr double kTolerance = 1e-4;  // f32 engine against a double reference over a tiny model

// The file's keys give the config llama.cpp's qwen3next loader reads: experts, the shared expert's width, the
// hybrid layout with grouped key heads; the weights bind every tensor, the fused ones included.
TEST(Qwen3Next, ConfigReadsFusedDeltaNetAndSharedExpert) {
  auto model = Model::load(test::open_file(test::hybrid_model("qwen3next")));
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.architecture, "qwen3next");
  EXPECT_TRUE(c.is_moe());
  EXPECT_TRUE(c.is_hybrid());
  EXPECT_EQ(c.moe.n_expert, 8);
  EXPECT_EQ(c.moe.n_used, 2);
  EXPECT_EQ(c.moe.shared_ffn_dim, 64);
  EXPECT_TRUE(c.attn_output_gate);
  EXPECT_TRUE(c.delta_net.grouped_heads);
  EXPECT_EQ(c.delta_net.key_head_of(1), 0);  // qwen35 would read key head 1
  EXPECT_EQ(c.delta_net.key_head_of(2), 1);
  EXPECT_EQ(c.rope_dim, 8);
}

// Hearth's logits agree with the reference; splitting the fused projections as whole blocks, tiling the key heads
// as qwen35 does, and dropping the shared expert or the convolution each take it far off.
TEST(ArchReference, Qwen3NextMatchesScalarReference) {
  const auto file = test::open_file(test::hybrid_model("qwen3next"));
  const auto engine = test::engine_logits(file, kQwenTokens);
  const double diff = test::max_relative_difference(engine, test::reference_logits(*file, kQwenTokens));
  EXPECT_LT(diff, kTolerance);
  testing::Test::RecordProperty("max_relative_difference", std::to_string(diff));
  const std::vector<std::pair<const char*, test::ReferenceOptions>> features = {
      {"the per-key-head split of ssm_in and ssm_ba", {.ungrouped_fused = true}},
      {"the grouped key heads", {.tiled_key_heads = true}},
      {"the shared expert", {.skip_shared_expert = true}},
      {"the convolution", {.skip_conv = true}},
      {"the attention's output gate", {.skip_attn_gate = true}}};
  for (const auto& [name, without] : features) {
    EXPECT_GT(test::max_relative_difference(engine, test::reference_logits(*file, kQwenTokens, without)),
              100 * kTolerance)
        << "without " << name;
  }
}

// The logits and the recurrent state after 60 tokens have the same bits however the tokens are chunked, in F32
// and in Q8_0 (hybrid_support.h).
TEST(ArchHybrid, Qwen3NextSameBitsWhateverTheChunking) {
  test::expect_same_bits_whatever_the_chunking("qwen3next", DType::F32);
}
TEST(ArchHybrid, Qwen3NextQ8SameBitsWhateverTheChunking) {
  test::expect_same_bits_whatever_the_chunking("qwen3next", DType::Q8_0);
}

// llama.cpp v0.5.0's qwen3next graph (ssm_in and ssm_ba split per key head, q and k repeat-interleaved, the
// experts and the gated shared expert) and Hearth's agree on 32 greedy tokens, on the F32 file (qwen35moe_test says
// why not Q8_0).
TEST(ArchPeer, Qwen3NextGreedyMatchesLlamaCpp) {
  test::expect_greedy_matches_peer(test::hybrid_model("qwen3next"), "qwen3next");
}

}  // namespace
}  // namespace hearth

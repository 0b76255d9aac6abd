// model_memory.h: the memory estimate the several-models budget counts bounds what a loaded model holds, and is
// close to it once the largest step has run.
#include "model/model_memory.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"
#include "model/model.h"
#include "model/synth.h"
#include "tmp_files.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const GgufFile> synthetic(const std::string& arch, DType type) {
  SynthConfig c;
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  c.out_path = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/model_memory_test_" + arch + "_" +
                                    std::to_string(getpid()) + ".gguf");
  c.vocab_from = std::string(HEARTH_SHARED_DIR) + "/models/stories260K.gguf";
  c.architecture = arch;
  c.dim = 256;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 512;
  c.context_length = 256;
  c.weight_type = type;
  c.num_threads = 1;
  if (arch == "qwen3moe" || arch == "qwen35moe") {
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.expert_ffn_dim = 256;
  }
  if (arch == "qwen35moe") c.full_attention_interval = 2;  // layer 0 Gated DeltaNet, layer 1 attention
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  auto file = GgufFile::open(c.out_path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return nullptr;
  fs::remove(c.out_path);  // the mapping stays valid
  return std::make_shared<const GgufFile>(std::move(*file));
}

// Runs steps of the given shapes (rows per sequence) through the model, each sequence wanting logits.
void run_steps(Model& model, const std::vector<std::vector<int32_t>>& steps) {
  const ModelConfig& c = model.config();
  KvStorage kv(c.kv_shape(), 16, 64);
  if (c.is_hybrid()) kv.reserve_state_slots(4, c.recurrent_state_floats());
  ThreadPool pool(2);
  for (const auto& rows : steps) {
    std::vector<TokenId> tokens;
    std::vector<BatchSequence> seqs;
    std::vector<std::vector<BlockId>> tables(rows.size());
    for (size_t s = 0; s < rows.size(); ++s) {
      const int32_t first = static_cast<int32_t>(tokens.size());
      for (int32_t i = 0; i < rows[s]; ++i) tokens.push_back(TokenId{(first + i * 7) % c.n_vocab});
      // Sequence s owns blocks [16 s, 16 s + 16): 256 positions each.
      for (int32_t b = 0; b < 16; ++b) tables[s].push_back(BlockId{static_cast<int32_t>(16 * s) + b});
      seqs.push_back(BatchSequence{.first_row = first,
                                   .n_tokens = rows[s],
                                   .pos_begin = 0,
                                   .block_table = tables[s],
                                   .want_logits = true,
                                   .state_slot = static_cast<int32_t>(s)});
    }
    model.forward({tokens, seqs}, kv, pool);
  }
}

void check(const std::string& arch, DType type) {
  auto file = synthetic(arch, type);
  ASSERT_NE(file, nullptr);
  const ForwardShape shape{96, 4, 2};
  auto estimate = estimate_model_memory(*file, shape);
  ASSERT_TRUE(estimate.ok()) << estimate.error().message;
  auto model = Model::load(file);
  ASSERT_TRUE(model.ok()) << model.error().message;

  // Weights: the same count, exactly (packed copies where this CPU packs, mapped tensors elsewhere).
  EXPECT_EQ((*model)->memory().weights_bytes, estimate->weights_bytes);
  EXPECT_GE(estimate->weights_bytes, static_cast<int64_t>((*model)->packed_bytes()));
  if (isa_at_least(IsaLevel::kAvx2) && type != DType::F32) EXPECT_GT((*model)->packed_bytes(), 0u);

  // Scratch: decode steps, an uneven prefill, then the largest step (4 sequences, 96 rows); never above the
  // estimate, and within a quarter of it at the largest step.
  run_steps(**model, {{1}, {1, 1, 1}, {37}, {50, 13}});
  EXPECT_LE((*model)->memory().scratch_bytes, estimate->scratch_bytes);
  run_steps(**model, {{60, 20, 15, 1}, {1, 1, 1, 1}, {96}});
  const int64_t measured = (*model)->memory().scratch_bytes;
  EXPECT_LE(measured, estimate->scratch_bytes);
  EXPECT_GE(measured, estimate->scratch_bytes * 3 / 4) << measured << " of " << estimate->scratch_bytes;

  // The tokenizer's tables: 512 stories260K tokens, no merges.
  EXPECT_GE(estimate->tokenizer_bytes, 512 * 96);
}

TEST(ModelMemory, EstimateBoundsALlamaModelQ8) { check("llama", DType::Q8_0); }
TEST(ModelMemory, EstimateBoundsALlamaModelF32) { check("llama", DType::F32); }
TEST(ModelMemory, EstimateBoundsAQwen3MoeModelQ4K) { check("qwen3moe", DType::Q4_K); }
// The hybrid with experts and a shared expert (its rows are MoeFfn scratch too).
TEST(ModelMemory, EstimateBoundsAQwen35MoeModelQ8) {
  check("qwen35moe", DType::Q8_0);
}

}  // namespace
}  // namespace hearth

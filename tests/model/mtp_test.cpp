// Multi-token-prediction (MTP) blocks in hybrid files (issue #54). Qwen3.5/3.6 and Qwen3-Next checkpoints carry
// MTP blocks that llama.cpp's converter keeps: block_count counts them, <arch>.nextn_predict_layers says how many of
// the last blocks they are, and llama.cpp's qwen35/qwen35moe/qwen3next graphs run only the blocks before them
// (llama_hparams::n_layer()). Hearth loads such a file as the same model without them: on each hybrid family, the
// tiny file of hybrid_support.h written with one MTP block (every other tensor the same bytes) gives a config of 4
// running layers, the same K/V planes, recurrent state, plan and resident weights, and bit-identical logits on a
// prefill and 12 greedy steps; llama.cpp v0.5.0 (which skips the blocks unless asked for the MTP draft) and Hearth
// agree on its greedy tokens.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "arch_support.h"
#include "hybrid_support.h"
#include "kv/kv_plan.h"
#include "model/fingerprint.h"
#include "model/model.h"
#include "model/model_memory.h"
#include "tensor/kv_dtype.h"

namespace hearth {
namespace {

using test::HybridFamily;

class MtpLayers : public testing::TestWithParam<HybridFamily> {
 protected:
  const std::string& plain_path() const { return test::hybrid_model(GetParam().architecture); }
  const std::string& mtp_path() const { return test::hybrid_model(GetParam().architecture, DType::F32, 7, 1); }
};

std::unique_ptr<Model> load(const std::string& path) {
  auto model = Model::load(test::open_file(path));
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  return model.ok() ? std::move(*model) : nullptr;
}

// Every logit row of a 20-token prefill and 12 greedy steps, one after the other, and the greedy tokens.
struct GreedyRun {
  std::vector<float> logits;
  std::vector<int32_t> tokens;
};
GreedyRun greedy_run(Model& model) {
  const ModelConfig& c = model.config();
  KvStorage kv(c.kv_shape(), 16, 4);
  kv.reserve_state_slots(1, c.recurrent_state_floats());
  ThreadPool pool(2);
  const std::vector<BlockId> table = {BlockId{0}, BlockId{1}, BlockId{2}, BlockId{3}};
  std::vector<TokenId> batch;
  for (int32_t id : test::sample_tokens(20, 3)) batch.push_back(TokenId{id % c.n_vocab});
  GreedyRun run;
  int32_t pos = 0;
  for (int step = 0; step <= 12; ++step) {
    const auto n = static_cast<int32_t>(batch.size());
    const BatchSequence seq{.first_row = 0, .n_tokens = n, .pos_begin = pos, .block_table = table, .want_logits = true};
    const auto out = model.forward({batch, {&seq, 1}}, kv, pool);
    run.logits.insert(run.logits.end(), out.begin(), out.end());
    const auto next = static_cast<int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
    run.tokens.push_back(next);
    pos += n;
    batch = {TokenId{next}};
  }
  return run;
}

// The config counts the blocks that run; the K/V planes, the recurrent state and the resident weights are the
// model's without the MTP block; the fingerprint names the file (the disk tier keeps the two apart).
TEST_P(MtpLayers, ConfigCountsOnlyTheLayersThatRun) {
  const auto plain = load(plain_path());
  const auto mtp = load(mtp_path());
  ASSERT_TRUE(plain && mtp);
  const ModelConfig& p = plain->config();
  const ModelConfig& m = mtp->config();
  EXPECT_EQ(m.n_layers, 4);
  EXPECT_EQ(m.n_nextn_layers, 1);
  EXPECT_EQ(p.n_nextn_layers, 0);
  EXPECT_EQ(m.n_recurrent_layers(), p.n_recurrent_layers());
  EXPECT_EQ(m.n_kv_layers(), 1);
  EXPECT_EQ(m.kv_shape().n_layers, p.kv_shape().n_layers);
  EXPECT_EQ(m.kv_shape().n_kv_heads, p.kv_shape().n_kv_heads);
  EXPECT_EQ(m.kv_shape().head_dim, p.kv_shape().head_dim);
  EXPECT_EQ(m.recurrent_state_floats(), p.recurrent_state_floats());
  const auto plain_file = test::open_file(plain_path());
  const auto mtp_file = test::open_file(mtp_path());
  const ForwardShape shape;
  auto plain_memory = estimate_model_memory(*plain_file, shape);
  auto mtp_memory = estimate_model_memory(*mtp_file, shape);
  ASSERT_TRUE(plain_memory.ok() && mtp_memory.ok());
  EXPECT_EQ(mtp_memory->weights_bytes, plain_memory->weights_bytes);
  EXPECT_EQ(mtp_memory->scratch_bytes, plain_memory->scratch_bytes);
  EXPECT_GT(mtp_file->tensor_data_bytes(), plain_file->tensor_data_bytes());
  EXPECT_NE(model_fingerprint(*mtp_file), model_fingerprint(*plain_file));
}

// hearth plan's K/V and state bytes (cmd_plan.cpp's request, from the config) are the model's without the block.
TEST_P(MtpLayers, PlanCountsTheSameKvAndStateBytes) {
  auto plan_of = [](const std::string& path) {
    auto file = GgufFile::open(path);
    EXPECT_TRUE(file.ok());
    auto config = ModelConfig::from_gguf(*file);
    EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
    MemoryPlanRequest request;
    request.shape = config->kv_shape();
    request.context = 256;
    request.users = 3;
    request.costs = kv_dtype_costs(request.shape, KvFormat{});
    request.dtype = KvFormat{}.name();
    request.state_bytes_per_user = config->recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
    auto plan = plan_memory(request);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
    return plan->requested();
  };
  const MemoryPlanRow plain = plan_of(plain_path());
  const MemoryPlanRow mtp = plan_of(mtp_path());
  EXPECT_GT(plain.kv_bytes, 0);
  EXPECT_EQ(mtp.bytes_per_token, plain.bytes_per_token);
  EXPECT_EQ(mtp.kv_bytes, plain.kv_bytes);
}

// The MTP block never runs: a prefill's and 12 greedy steps' logits have the same bits as without it.
TEST_P(MtpLayers, LogitsSameBitsAsWithoutTheBlock) {
  const auto plain = load(plain_path());
  const auto mtp = load(mtp_path());
  ASSERT_TRUE(plain && mtp);
  const GreedyRun a = greedy_run(*plain);
  const GreedyRun b = greedy_run(*mtp);
  EXPECT_EQ(b.tokens, a.tokens);
  test::expect_same_bits(b.logits, a.logits, std::string(GetParam().architecture) + " with an MTP block");
}

INSTANTIATE_TEST_SUITE_P(Mtp, MtpLayers, ::testing::ValuesIn(test::kHybridFamilies),
                         [](const ::testing::TestParamInfo<HybridFamily>& family) {
                           return std::string(family.param.name);
                         });

// llama.cpp v0.5.0 loads the file (its loader skips the MTP block's tensors unless it builds the MTP draft) and its
// greedy tokens and text are Hearth's.
class ArchPeerMtp : public MtpLayers {};
TEST_P(ArchPeerMtp, GreedyMatchesLlamaCpp) {
  test::expect_greedy_matches_peer(mtp_path(), std::string(GetParam().architecture) + " with an MTP block");
}
INSTANTIATE_TEST_SUITE_P(ArchPeer, ArchPeerMtp, ::testing::ValuesIn(test::kHybridFamilies),
                         [](const ::testing::TestParamInfo<HybridFamily>& family) {
                           return std::string(family.param.name);
                         });

}  // namespace
}  // namespace hearth

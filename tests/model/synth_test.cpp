// The synthetic model generator: tiny models of every weight type, read back with GgufFile and checked for
// metadata, tensor names, shapes, types and weight statistics; determinism; config errors.

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numbers>
#include <set>

#include "gguf/gguf_file.h"
#include "model/synth.h"
#include "tensor/quant.h"
#include "tmp_files.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

const std::string kShared = HEARTH_SHARED_DIR;
const std::string kVocab = kShared + "/models/stories260K.gguf";

std::string tmp_path(const std::string& name) {
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  return test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/synth_test_" + std::to_string(getpid()) + "_" +
                              name);  // one per process
}

// dim 64, 2 layers, 4 heads of 16, 2 KV heads (kv_dim 32), ffn 128: every block type that fits 32-wide rows.
SynthConfig small_config(DType type, const std::string& file) {
  SynthConfig c;
  c.out_path = tmp_path(file);
  c.vocab_from = kVocab;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 128;
  c.context_length = 256;
  c.weight_type = type;
  c.seed = 42;
  c.num_threads = 2;
  return c;
}

// K-quants need 256-wide rows.
SynthConfig k_quant_config(DType type, const std::string& file) {
  SynthConfig c = small_config(type, file);
  c.dim = 256;
  c.ffn_dim = 256;
  c.n_layers = 1;
  return c;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_shape(const GgufFile& f, const std::string& name, DType type, std::vector<int64_t> shape) {
  const GgufTensor* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, type) << name;
  ASSERT_EQ(t->n_dims, static_cast<int>(shape.size())) << name;
  for (size_t d = 0; d < shape.size(); ++d) EXPECT_EQ(t->ne[d], shape[d]) << name << " dim " << d;
}

// Mean and standard deviation of the whole tensor, dequantized row by row.
std::pair<double, double> tensor_stats(const GgufTensor& t) {
  std::vector<float> row(t.ne[0]);
  const size_t rbytes = row_bytes(t.type, t.ne[0]);
  const int64_t n_rows = t.num_elements() / t.ne[0];
  double sum = 0, sum_sq = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(t.type, t.data + r * rbytes, row.data(), t.ne[0]);
    for (float v : row) {
      sum += v;
      sum_sq += double{v} * v;
    }
  }
  const double n = static_cast<double>(t.num_elements());
  const double mean = sum / n;
  return {mean, std::sqrt(sum_sq / n - mean * mean)};
}

void check_model(const SynthConfig& c) {
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(*f->get_uint("llama.embedding_length").value(), static_cast<uint64_t>(c.dim));
  EXPECT_EQ(*f->get_uint("llama.block_count").value(), static_cast<uint64_t>(c.n_layers));
  EXPECT_EQ(*f->get_uint("llama.feed_forward_length").value(), static_cast<uint64_t>(c.ffn_dim));
  EXPECT_EQ(*f->get_uint("llama.attention.head_count").value(), static_cast<uint64_t>(c.n_heads));
  EXPECT_EQ(*f->get_uint("llama.attention.head_count_kv").value(), static_cast<uint64_t>(c.n_kv_heads));
  EXPECT_EQ(*f->get_uint("llama.context_length").value(), static_cast<uint64_t>(c.context_length));
  EXPECT_EQ(*f->get_uint("llama.rope.dimension_count").value(), static_cast<uint64_t>(c.dim / c.n_heads));
  EXPECT_EQ(*f->get_uint("llama.vocab_size").value(), 512u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon").value()), 1e-5f);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.rope.freq_base").value()), 10000.0f);
  EXPECT_TRUE(f->get_uint("general.file_type").value().has_value());
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value().size(), 512u);
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").value().size(), 512u);
  EXPECT_EQ(*f->get_uint("tokenizer.ggml.bos_token_id").value(), 1u);

  const DType w = c.weight_type;
  const int64_t kv_dim = c.n_kv_heads * (c.dim / c.n_heads);
  ASSERT_EQ(f->tensors().size(), static_cast<size_t>(3 + 9 * c.n_layers));
  expect_shape(*f, "token_embd.weight", w, {c.dim, 512});
  expect_shape(*f, "output_norm.weight", DType::F32, {c.dim});
  expect_shape(*f, "output.weight", w, {c.dim, 512});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    expect_shape(*f, b + "attn_norm.weight", DType::F32, {c.dim});
    expect_shape(*f, b + "attn_q.weight", w, {c.dim, c.dim});
    expect_shape(*f, b + "attn_k.weight", w, {c.dim, kv_dim});
    expect_shape(*f, b + "attn_v.weight", w, {c.dim, kv_dim});
    expect_shape(*f, b + "attn_output.weight", w, {c.dim, c.dim});
    expect_shape(*f, b + "ffn_norm.weight", DType::F32, {c.dim});
    expect_shape(*f, b + "ffn_gate.weight", w, {c.dim, c.ffn_dim});
    expect_shape(*f, b + "ffn_up.weight", w, {c.dim, c.ffn_dim});
    expect_shape(*f, b + "ffn_down.weight", w, {c.ffn_dim, c.dim});
  }
  const auto* norm = reinterpret_cast<const float*>(f->find_tensor("blk.0.ffn_norm.weight")->data);
  for (int64_t i = 0; i < c.dim; ++i) ASSERT_EQ(norm[i], 1.0f);
  const auto [mean, sd] = tensor_stats(*f->find_tensor("token_embd.weight"));
  EXPECT_NEAR(mean, 0.0, 0.002) << dtype_name(w);
  EXPECT_NEAR(sd, 0.02, 0.002) << dtype_name(w);
}

class SynthEveryType : public ::testing::TestWithParam<DType> {};

TEST_P(SynthEveryType, WritesAValidLlamaModel) {
  const DType type = GetParam();
  const std::string file = fmt::format("{}.gguf", dtype_name(type));
  const SynthConfig c = dtype_info(type).block_size == 256 ? k_quant_config(type, file) : small_config(type, file);
  auto written = write_synthetic_model(c);
  ASSERT_TRUE(written) << written.error().message;
  check_model(c);
  fs::remove(c.out_path);
}

INSTANTIATE_TEST_SUITE_P(Types, SynthEveryType,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// --chat-template: a template the vocabulary lacks (gpt-oss's harmony) is written as tokenizer.chat_template, and
// one it has is replaced; without it the vocabulary's own is copied.
TEST(Synth, ChatTemplateIsWrittenInPlaceOfTheVocabularys) {
  SynthConfig c = small_config(DType::F16, "chat_template.gguf");
  c.vocab_from = std::string(HEARTH_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf";
  ASSERT_TRUE(write_synthetic_model(c));
  const std::string own = *GgufFile::open(c.vocab_from)->get_string("tokenizer.chat_template").value();
  EXPECT_EQ(*GgufFile::open(c.out_path)->get_string("tokenizer.chat_template").value(), own);
  c.chat_template = "{{ messages[0].content }}";
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  EXPECT_EQ(*f->get_string("tokenizer.chat_template").value(), "{{ messages[0].content }}");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value().size(), 151669u);
  fs::remove(c.out_path);
}

// qwen2 adds random q/k/v biases and qwen3 per-head q/k norm weights around 1, under <arch>.* keys (qwen3 also
// writes attention.key_length / value_length, as llama.cpp's converter does).
TEST(Synth, QwenArchitecturesAddTheirTensors) {
  for (const std::string arch : {"qwen2", "qwen3"}) {
    SynthConfig c = small_config(DType::F16, arch + ".gguf");
    c.architecture = arch;
    ASSERT_TRUE(write_synthetic_model(c)) << arch;
    auto f = GgufFile::open(c.out_path);
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(*f->get_string("general.architecture").value(), arch);
    EXPECT_EQ(*f->get_uint(arch + ".embedding_length").value(), 64u);
    EXPECT_FALSE(f->get_uint("llama.embedding_length").value().has_value());
    const size_t per_layer = 9 + (arch == "qwen2" ? 3 : 2);
    EXPECT_EQ(f->tensors().size(), 3 + per_layer * c.n_layers) << arch;
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      if (arch == "qwen2") {
        expect_shape(*f, b + "attn_q.bias", DType::F32, {64});
        expect_shape(*f, b + "attn_k.bias", DType::F32, {32});
        expect_shape(*f, b + "attn_v.bias", DType::F32, {32});
        const auto [mean, sd] = tensor_stats(*f->find_tensor(b + "attn_q.bias"));
        EXPECT_NEAR(mean, 0.0, 0.05);
        EXPECT_NEAR(sd, 0.1, 0.05);
      } else {
        EXPECT_EQ(*f->get_uint("qwen3.attention.key_length").value(), 16u);
        expect_shape(*f, b + "attn_q_norm.weight", DType::F32, {16});
        expect_shape(*f, b + "attn_k_norm.weight", DType::F32, {16});
        const auto [mean, sd] = tensor_stats(*f->find_tensor(b + "attn_k_norm.weight"));
        EXPECT_NEAR(mean, 1.0, 0.1);
        EXPECT_GT(sd, 0.02);
      }
    }
    fs::remove(c.out_path);
  }
}

// qwen3moe, as llama.cpp's converter writes Qwen3-30B-A3B: qwen3's attention (q/k norms, key_length, here heads of
// 32 in a 64-wide model, so q is 128 wide), the expert keys, and per layer an F32 router and three 3-D expert
// tensors instead of ffn_gate/ffn_up/ffn_down.
TEST(Synth, Qwen3MoeWritesLlamaCppsExpertTensors) {
  SynthConfig c = small_config(DType::Q8_0, "qwen3moe.gguf");
  c.architecture = "qwen3moe";
  c.head_dim = 32;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_ffn_dim = 96;
  c.router_sd = 0.5f;
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_string("general.architecture").value(), "qwen3moe");
  EXPECT_EQ(*f->get_uint("qwen3moe.expert_count").value(), 8u);
  EXPECT_EQ(*f->get_uint("qwen3moe.expert_used_count").value(), 2u);
  EXPECT_EQ(*f->get_uint("qwen3moe.expert_feed_forward_length").value(), 96u);
  EXPECT_EQ(*f->get_uint("qwen3moe.feed_forward_length").value(), 128u);
  EXPECT_EQ(*f->get_uint("qwen3moe.attention.key_length").value(), 32u);
  EXPECT_EQ(*f->get_uint("qwen3moe.attention.value_length").value(), 32u);
  EXPECT_EQ(*f->get_uint("qwen3moe.rope.dimension_count").value(), 32u);
  EXPECT_EQ(f->tensors().size(), 3 + 12 * c.n_layers);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    expect_shape(*f, b + "attn_q.weight", DType::Q8_0, {64, 128});
    expect_shape(*f, b + "attn_k.weight", DType::Q8_0, {64, 64});
    expect_shape(*f, b + "attn_output.weight", DType::Q8_0, {128, 64});
    expect_shape(*f, b + "attn_q_norm.weight", DType::F32, {32});
    expect_shape(*f, b + "attn_k_norm.weight", DType::F32, {32});
    expect_shape(*f, b + "ffn_gate_inp.weight", DType::F32, {64, 8});
    expect_shape(*f, b + "ffn_gate_exps.weight", DType::Q8_0, {64, 96, 8});
    expect_shape(*f, b + "ffn_up_exps.weight", DType::Q8_0, {64, 96, 8});
    expect_shape(*f, b + "ffn_down_exps.weight", DType::Q8_0, {96, 64, 8});
    EXPECT_EQ(f->find_tensor(b + "ffn_gate.weight"), nullptr);
    EXPECT_EQ(f->find_tensor(b + "ffn_down.weight"), nullptr);
  }
  const auto [mean, sd] = tensor_stats(*f->find_tensor("blk.0.ffn_gate_inp.weight"));
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(sd, 0.5, 0.1);
  const auto [exp_mean, exp_sd] = tensor_stats(*f->find_tensor("blk.1.ffn_down_exps.weight"));
  EXPECT_NEAR(exp_mean, 0.0, 0.002);
  EXPECT_NEAR(exp_sd, 0.02, 0.002);
  fs::remove(c.out_path);
}

// qwen35moe: qwen35's hybrid layers (layers 0 and 2 Gated DeltaNet, 1 and 3 gated attention), each with qwen3moe's
// router and experts and the shared expert llama.cpp's qwen35moe loader reads (ffn_gate_inp_shexp [dim] in F32,
// ffn_{gate,up}_shexp [dim, ffn], ffn_down_shexp [ffn, dim]), its width as expert_shared_feed_forward_length.
TEST(Synth, Qwen35MoeWritesLlamaCppsSharedExpertTensors) {
  SynthConfig c = small_config(DType::Q8_0, "qwen35moe.gguf");
  c.architecture = "qwen35moe";
  c.n_layers = 4;
  c.full_attention_interval = 2;
  c.head_dim = 32;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_ffn_dim = 96;
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_string("general.architecture").value(), "qwen35moe");
  EXPECT_EQ(*f->get_uint("qwen35moe.expert_count").value(), 8u);
  EXPECT_EQ(*f->get_uint("qwen35moe.expert_used_count").value(), 2u);
  EXPECT_EQ(*f->get_uint("qwen35moe.expert_feed_forward_length").value(), 96u);
  EXPECT_EQ(*f->get_uint("qwen35moe.expert_shared_feed_forward_length").value(), 128u);
  EXPECT_EQ(*f->get_uint("qwen35moe.full_attention_interval").value(), 2u);
  EXPECT_EQ(*f->get_uint("qwen35moe.ssm.state_size").value(), 32u);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    expect_shape(*f, b + "post_attention_norm.weight", DType::F32, {64});
    expect_shape(*f, b + "ffn_gate_inp.weight", DType::F32, {64, 8});
    expect_shape(*f, b + "ffn_gate_exps.weight", DType::Q8_0, {64, 96, 8});
    expect_shape(*f, b + "ffn_down_exps.weight", DType::Q8_0, {96, 64, 8});
    expect_shape(*f, b + "ffn_gate_inp_shexp.weight", DType::F32, {64});
    expect_shape(*f, b + "ffn_gate_shexp.weight", DType::Q8_0, {64, 128});
    expect_shape(*f, b + "ffn_up_shexp.weight", DType::Q8_0, {64, 128});
    expect_shape(*f, b + "ffn_down_shexp.weight", DType::Q8_0, {128, 64});
    EXPECT_EQ(f->find_tensor(b + "ffn_gate.weight"), nullptr);
    EXPECT_EQ(f->find_tensor(b + (i % 2 == 0 ? "attn_q.weight" : "attn_qkv.weight")), nullptr) << i;
  }
  fs::remove(c.out_path);
}

// Multi-token-prediction blocks as llama.cpp's converter keeps Qwen's mtp.* and its qwen35moe loader reads them:
// block_count counts them, nextn_predict_layers says how many, and blk.4 (after the 4 layers that run) is a gated
// full-attention layer with the experts and shared expert plus nextn.eh_proj [2 dim, dim] and nextn.enorm, hnorm
// and shared_head_norm [dim]. Every tensor the file without them has is the same bytes.
TEST(Synth, Qwen35MoeMtpBlocksFollowLlamaCppsLayout) {
  SynthConfig c = small_config(DType::Q8_0, "qwen35moe-plain.gguf");
  c.architecture = "qwen35moe";
  c.n_layers = 4;
  c.full_attention_interval = 2;
  c.head_dim = 32;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_ffn_dim = 96;
  ASSERT_TRUE(write_synthetic_model(c));
  SynthConfig m = c;
  m.out_path = (fs::path(c.out_path).parent_path() / "qwen35moe-mtp.gguf").string();
  m.nextn_layers = 1;
  ASSERT_TRUE(write_synthetic_model(m));
  auto plain = GgufFile::open(c.out_path);
  auto f = GgufFile::open(m.out_path);
  ASSERT_TRUE(plain && f);
  EXPECT_EQ(*f->get_uint("qwen35moe.block_count").value(), 5u);
  EXPECT_EQ(*f->get_uint("qwen35moe.nextn_predict_layers").value(), 1u);
  EXPECT_FALSE(plain->get_uint("qwen35moe.nextn_predict_layers").value().has_value());
  expect_shape(*f, "blk.4.attn_q.weight", DType::Q8_0, {64, 256});
  expect_shape(*f, "blk.4.attn_k_norm.weight", DType::F32, {32});
  expect_shape(*f, "blk.4.ffn_gate_exps.weight", DType::Q8_0, {64, 96, 8});
  expect_shape(*f, "blk.4.ffn_down_shexp.weight", DType::Q8_0, {128, 64});
  expect_shape(*f, "blk.4.nextn.eh_proj.weight", DType::Q8_0, {128, 64});
  for (const char* norm : {"enorm", "hnorm", "shared_head_norm"}) {
    expect_shape(*f, std::string("blk.4.nextn.") + norm + ".weight", DType::F32, {64});
  }
  for (const char* gone : {"blk.4.attn_qkv.weight", "blk.4.ssm_a", "blk.4.nextn.embed_tokens.weight",
                           "blk.4.nextn.shared_head_head.weight", "blk.5.attn_norm.weight"}) {
    EXPECT_EQ(f->find_tensor(gone), nullptr) << gone;
  }
  EXPECT_EQ(f->tensors().size(), plain->tensors().size() + 20);
  for (const GgufTensor& t : plain->tensors()) {
    const GgufTensor* same = f->find_tensor(t.name);
    ASSERT_NE(same, nullptr) << t.name;
    ASSERT_EQ(same->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(same->data, t.data, t.nbytes), 0) << t.name;
  }
  fs::remove(c.out_path);
  fs::remove(m.out_path);
}

// qwen3next: qwen35moe's layers with llama.cpp's older DeltaNet tensors, ssm_in [dim, 2 key_dim + 2 value_dim] and
// ssm_ba [dim, 2 n_v_heads] in place of attn_qkv, attn_gate, ssm_alpha and ssm_beta, and no rope sections.
TEST(Synth, Qwen3NextWritesFusedDeltaNetTensors) {
  SynthConfig c = small_config(DType::Q8_0, "qwen3next.gguf");
  c.architecture = "qwen3next";
  c.n_layers = 4;
  c.full_attention_interval = 2;
  c.head_dim = 32;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.expert_ffn_dim = 96;
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_string("general.architecture").value(), "qwen3next");
  EXPECT_EQ(*f->get_uint("qwen3next.expert_shared_feed_forward_length").value(), 128u);
  EXPECT_EQ(*f->get_uint("qwen3next.ssm.group_count").value(), 2u);
  EXPECT_EQ(*f->get_uint("qwen3next.ssm.time_step_rank").value(), 4u);
  EXPECT_TRUE(f->get_int_array("qwen3next.rope.dimension_sections").value().empty());
  // 2 key heads and 4 value heads of 32: ssm_in 2·64 + 2·128 rows, ssm_ba 2·4.
  expect_shape(*f, "blk.0.ssm_in.weight", DType::Q8_0, {64, 384});
  expect_shape(*f, "blk.0.ssm_ba.weight", DType::Q8_0, {64, 8});
  expect_shape(*f, "blk.0.ffn_gate_inp_shexp.weight", DType::F32, {64});
  for (const char* gone : {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_beta.weight"}) {
    EXPECT_EQ(f->find_tensor(gone), nullptr) << gone;
  }
  fs::remove(c.out_path);
}

// The MXFP4 mix, as llama-quantize's MXFP4_MOE writes it and as the published gpt-oss files hold their experts: the
// three 3-D expert tensors in MXFP4, every other matrix in Q8_0, the router, biases, sinks and norms in F32, and
// general.file_type 38 (MOSTLY_MXFP4_MOE).
TEST(Synth, GptOssMxfp4MixQuantizesTheExperts) {
  SynthConfig c = small_config(DType::MXFP4, "gpt-oss-mxfp4.gguf");
  c.architecture = "gpt-oss";
  c.head_dim = 32;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.expert_ffn_dim = 64;
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_uint("general.file_type").value(), 38u);
  expect_shape(*f, "token_embd.weight", DType::Q8_0, {64, 512});
  expect_shape(*f, "output.weight", DType::Q8_0, {64, 512});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* name : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) {
      EXPECT_EQ(f->find_tensor(b + name)->type, DType::Q8_0) << b << name;
    }
    expect_shape(*f, b + "ffn_gate_inp.weight", DType::F32, {64, 4});
    expect_shape(*f, b + "ffn_gate_exps.weight", DType::MXFP4, {64, 64, 4});
    expect_shape(*f, b + "ffn_up_exps.weight", DType::MXFP4, {64, 64, 4});
    expect_shape(*f, b + "ffn_down_exps.weight", DType::MXFP4, {64, 64, 4});
    expect_shape(*f, b + "ffn_down_exps.bias", DType::F32, {64, 4});
    expect_shape(*f, b + "attn_sinks.weight", DType::F32, {4});
  }
  // E2M1 keeps about one significant bit: the Gaussian's spread survives, within a few percent.
  const auto [mean, sd] = tensor_stats(*f->find_tensor("blk.1.ffn_up_exps.weight"));
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.003);
  fs::remove(c.out_path);
}

// phi3 fuses q/k/v into attn_qkv and gate/up into a double-height ffn_up (no ffn_gate), as llama.cpp's converter
// writes it, and states its sliding window (the context length unless set).
TEST(Synth, Phi3FusesItsMatrices) {
  SynthConfig c = small_config(DType::Q8_0, "phi3.gguf");
  c.architecture = "phi3";
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_uint("phi3.attention.sliding_window").value(), static_cast<uint64_t>(c.context_length));
  EXPECT_EQ(f->tensors().size(), 3 + 6 * c.n_layers);
  expect_shape(*f, "blk.0.attn_qkv.weight", DType::Q8_0, {64, 64 + 2 * 32});
  expect_shape(*f, "blk.1.ffn_up.weight", DType::Q8_0, {64, 2 * c.ffn_dim});
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight"), nullptr);
  fs::remove(c.out_path);
}

// Llama 3.1's rope_freqs.weight at the real parameters (factor 8, low 1, high 4, original context 8192) for head
// size 16 and base 500000: pairs with wavelengths below 2048 keep 1, above 8192 get 8, one pair in between.
TEST(Synth, Llama3RopeFreqsFollowTheFormula) {
  SynthConfig c = small_config(DType::F16, "llama3.gguf");
  c.llama3_rope_freqs = true;
  c.rope_freq_base = 500000.0f;
  ASSERT_TRUE(write_synthetic_model(c));
  auto f = GgufFile::open(c.out_path);
  ASSERT_TRUE(f) << f.error().message;
  expect_shape(*f, "rope_freqs.weight", DType::F32, {8});
  const auto* freqs = reinterpret_cast<const float*>(f->find_tensor("rope_freqs.weight")->data);
  const std::vector<float> expected = llama3_rope_freqs(c);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(freqs[i], expected[i]) << i;
  // Wavelengths 2π·500000^(i/8): 6.3, 32, 167, 860 (all < 2048): 1; 4437: smooth; 22900 and up: 8.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(expected[i], 1.0f) << i;
  const double smooth = (8192 / (2 * std::numbers::pi * std::pow(500000.0, 4.0 / 8)) - 1) / 3;
  EXPECT_NEAR(expected[4], 1 / ((1 - smooth) / 8 + smooth), 1e-5);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(expected[i], 8.0f) << i;
  fs::remove(c.out_path);
}

TEST(Synth, SameSeedSameBytesWhateverTheThreadCount) {
  SynthConfig a = small_config(DType::Q8_0, "det_a.gguf");
  SynthConfig b = small_config(DType::Q8_0, "det_b.gguf");
  a.num_threads = 1;
  b.num_threads = 3;
  ASSERT_TRUE(write_synthetic_model(a));
  ASSERT_TRUE(write_synthetic_model(b));
  EXPECT_EQ(file_bytes(a.out_path), file_bytes(b.out_path));
  b.seed = 43;
  ASSERT_TRUE(write_synthetic_model(b));
  EXPECT_NE(file_bytes(a.out_path), file_bytes(b.out_path));
  fs::remove(a.out_path);
  fs::remove(b.out_path);
}

TEST(Synth, TinyPresetMatchesTheSharedSyntheticModel) {
  // The shared synth-tiny-f16.gguf was written by another tool; the "tiny" preset must produce the same layout.
  std::optional<SynthConfig> c = synth_preset("tiny");
  ASSERT_TRUE(c.has_value());
  c->out_path = tmp_path("tiny.gguf");
  c->vocab_from = kVocab;
  ASSERT_TRUE(write_synthetic_model(*c));
  auto ours = GgufFile::open(c->out_path);
  auto theirs = GgufFile::open(kShared + "/models/synthetic/synth-tiny-f16.gguf");
  ASSERT_TRUE(ours && theirs);
  std::map<std::string, std::pair<DType, std::vector<int64_t>>> a, b;
  for (const GgufTensor& t : ours->tensors()) a[t.name] = {t.type, {t.ne, t.ne + t.n_dims}};
  for (const GgufTensor& t : theirs->tensors()) b[t.name] = {t.type, {t.ne, t.ne + t.n_dims}};
  EXPECT_EQ(a, b);
  for (const auto& [key, value] : theirs->metadata()) {
    if (!key.starts_with("llama.")) continue;
    const GgufValue* mine = ours->find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(gguf_value_to_string(*mine), gguf_value_to_string(value)) << key;
  }
  fs::remove(c->out_path);
}

// The Q4_K_M mix: every tensor of the tiny preset gets the type llama-quantize gave it in the shared
// synth-tiny-q4_k_m.gguf (13 Q4_K, 3 Q6_K: output, and layer 1's attn_v and ffn_down), and general.file_type 15.
TEST(Synth, Q4KMMixMatchesLlamaQuantizesTypes) {
  std::optional<SynthConfig> c = synth_preset("tiny");
  ASSERT_TRUE(c.has_value());
  c->out_path = tmp_path("tiny-q4_k_m.gguf");
  c->vocab_from = kVocab;
  c->weight_type = DType::Q4_K;
  c->q4_k_m = true;
  ASSERT_TRUE(write_synthetic_model(*c));
  auto ours = GgufFile::open(c->out_path);
  auto theirs = GgufFile::open(kShared + "/models/mixes/synth-tiny-q4_k_m.gguf");
  ASSERT_TRUE(ours && theirs);
  std::map<std::string, DType> a, b;
  for (const GgufTensor& t : ours->tensors()) a[t.name] = t.type;
  for (const GgufTensor& t : theirs->tensors()) b[t.name] = t.type;
  EXPECT_EQ(a, b);
  EXPECT_EQ(gguf_value_to_string(*ours->find("general.file_type")),
            gguf_value_to_string(*theirs->find("general.file_type")));
  fs::remove(c->out_path);
}

// On 16 layers the mix follows use_more_bits: layers 0-1 and 14-15, and every third from 4, get Q6_K.
TEST(Synth, Q4KMMixPicksLlamaQuantizesLayers) {
  SynthConfig c = small_config(DType::Q4_K, "q4_k_m16.gguf");
  c.dim = 256;
  c.ffn_dim = 256;
  c.n_layers = 16;
  c.q4_k_m = true;
  ASSERT_TRUE(write_synthetic_model(c));
  auto file = GgufFile::open(c.out_path);
  ASSERT_TRUE(file);
  std::set<int> more;
  for (const GgufTensor& t : file->tensors()) {
    if (t.name.ends_with("attn_v.weight") && t.type == DType::Q6_K) more.insert(std::stoi(t.name.substr(4)));
    if (t.name.ends_with("ffn_down.weight")) {
      EXPECT_EQ(t.type, more.count(std::stoi(t.name.substr(4))) ? DType::Q6_K : DType::Q4_K) << t.name;
    }
    if (t.name == "output.weight") {
      EXPECT_EQ(t.type, DType::Q6_K);
    }
    if (t.name.ends_with("attn_q.weight")) {
      EXPECT_EQ(t.type, DType::Q4_K) << t.name;
    }
  }
  EXPECT_EQ(more, (std::set<int>{0, 1, 4, 7, 10, 13, 14, 15}));
  fs::remove(c.out_path);
}

TEST(Synth, PresetsAreValid) {
  for (const char* name : {"tiny", "1b", "3b", "8b", "30b-a3b", "qwen35-35b-a3b", "qwen3next-80b-a3b"}) {
    std::optional<SynthConfig> c = synth_preset(name);
    ASSERT_TRUE(c.has_value()) << name;
    c->out_path = "x.gguf";
    c->vocab_from = kVocab;
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
      c->weight_type = type;
      auto valid = validate_synth_config(*c);
      EXPECT_TRUE(valid) << name << " " << dtype_name(type) << ": " << valid.error().message;
    }
  }
  EXPECT_FALSE(synth_preset("70b").has_value());
}

TEST(Synth, BadConfigsAreExplained) {
  struct Case {
    std::function<void(SynthConfig&)> change;
    const char* error;
  };
  const Case cases[] = {
      {[](SynthConfig& c) { c.out_path.clear(); }, "no output path"},
      {[](SynthConfig& c) { c.vocab_from.clear(); }, "no vocabulary file"},
      {[](SynthConfig& c) { c.dim = 0; }, "dim is 0, expected 1 to"},
      {[](SynthConfig& c) { c.n_heads = 3; }, "dim 64 is not divisible by n_heads 3"},
      {[](SynthConfig& c) { c.n_kv_heads = 3; }, "n_heads 4 is not a multiple of n_kv_heads 3"},
      {[](SynthConfig& c) { c.n_heads = 64; }, "head dim 1 is odd"},
      {[](SynthConfig& c) { c.weight_type = DType::Q4_K; }, "Q4_K rows need multiples of 256 elements"},
      {[](SynthConfig& c) { c.ffn_dim = 48; },
       "Q8_0 rows need multiples of 32 elements, but dim is 64, ffn_dim 48 and n_heads × head_dim 64"},
      {[](SynthConfig& c) { c.weight_type = DType::Q5_K; }, "weight type Q5_K has no quantizer"},
      {[](SynthConfig& c) { c.weight_type = DType::MXFP4; },
       "the MXFP4 mix quantizes the experts, and llama has none (use qwen3moe, qwen35moe, qwen3next or gpt-oss)"},
      {[](SynthConfig& c) { c.vocab_from = "/nonexistent/vocab.gguf"; }, "vocabulary: /nonexistent/vocab.gguf"},
      {[](SynthConfig& c) { c.out_path = "/nonexistent-dir/m.gguf"; }, "cannot create"},
      {[](SynthConfig& c) { c.architecture = "gemma"; }, "architecture 'gemma' is not one the generator writes"},
      {[](SynthConfig& c) { c.architecture = "gemma2", c.attn_softcap = 0; }, "soft-capping values must be positive"},
      {[](SynthConfig& c) { c.bias_sd = -1; }, "bias_sd and qk_norm_sd must not be negative"},
      {[](SynthConfig& c) { c.architecture = "qwen2", c.llama3_rope_freqs = true; }, "for architecture llama only"},
      {[](SynthConfig& c) { c.llama3_rope_freqs = true, c.rope_high_freq_factor = 1; }, "Llama 3 RoPE scaling needs"},
      {[](SynthConfig& c) { c.head_dim = 32; }, "head_dim 32 is for qwen3, qwen3moe, gemma and gpt-oss only"},
      {[](SynthConfig& c) { c.n_expert = 8; },
       "experts are for architectures qwen3moe, qwen35moe, qwen3next, gpt-oss and gemma4 only"},
      {[](SynthConfig& c) { c.architecture = "qwen35moe"; }, "qwen35moe needs 1 <= experts used (0) <= experts (0)"},
      {[](SynthConfig& c) { c.architecture = "qwen35moe", c.n_expert = 4, c.n_expert_used = 2, c.expert_ffn_dim = 48; },
       "Q8_0 rows need multiples of 32 elements, but expert_ffn_dim is 48"},
      {[](SynthConfig& c) { c.architecture = "qwen3moe"; }, "qwen3moe needs 1 <= experts used (0) <= experts (0)"},
      {[](SynthConfig& c) { c.nextn_layers = 1; },
       "nextn_layers 1: multi-token-prediction blocks (0 to 16) are written for qwen35, qwen35moe and qwen3next only"},
      {[](SynthConfig& c) { c.architecture = "qwen3moe", c.n_expert = 4, c.n_expert_used = 5; },
       "qwen3moe needs 1 <= experts used (5) <= experts (4) <= 512"},
      {[](SynthConfig& c) { c.architecture = "qwen3moe", c.n_expert = 4, c.n_expert_used = 2, c.expert_ffn_dim = 48; },
       "but dim is 64, expert_ffn_dim 48"},
  };
  for (const Case& k : cases) {
    SynthConfig c = small_config(DType::Q8_0, "bad.gguf");
    k.change(c);
    auto result = write_synthetic_model(c);
    ASSERT_FALSE(result) << k.error;
    EXPECT_NE(result.error().message.find(k.error), std::string::npos) << result.error().message;
  }
}

}  // namespace
}  // namespace hearth

// What Model::load refuses, and how it says so: an unknown architecture (listing the supported ones), a missing
// required tensor and an unknown tensor (naming it: a tensor Hearth ignored would mean a different model). And the
// optional q/k/v biases of the llama family, which are used when present (checked against the scalar reference);
// RoPE scaling (linear used, anything else refused by key), Phi-3 LongRoPE refused, phi3 sliding window.

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/synth.h"
#include "reference_forward.h"
#include "tmp_files.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

const std::string kShared = HEARTH_SHARED_DIR;

// A small model of `arch` with the stories260K vocabulary (512 tokens), written once per test binary.
const GgufFile& small_model(const std::string& arch) {
  static std::map<std::string, GgufFile> files;
  auto it = files.find(arch);
  if (it != files.end()) return it->second;
  SynthConfig c;
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  c.out_path = test::remove_at_exit(std::string(HEARTH_TEST_TMP_DIR) + "/model_load_test_" + arch + "_" +
                                    std::to_string(getpid()) + ".gguf");  // one per process
  c.vocab_from = kShared + "/models/stories260K.gguf";
  c.architecture = arch;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 128;
  c.context_length = 128;
  c.weight_type = DType::F32;
  c.weight_sd = 0.1f;
  c.bias_sd = 0.5f;
  c.num_threads = 1;
  // Hybrids: layer 0 Gated DeltaNet, 1 attention. MoE: 4 experts of 32, 2 used (qwen35moe, qwen3next: a shared
  // expert of 128).
  const bool hybrid = arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next";
  if (hybrid) c.full_attention_interval = 2;
  if (arch == "qwen3moe" || arch == "qwen35moe" || arch == "qwen3next") {
    c.n_expert = 4;
    c.n_expert_used = 2;
    c.expert_ffn_dim = 32;
  }
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  auto file = GgufFile::open(c.out_path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  return files.emplace(arch, std::move(*file)).first->second;
}

// A copy of `src` in memory, named "edited.gguf": metadata keys renamed from `src`'s architecture to `arch`,
// tensors for which `keep` is true, then `extra` tensors (filled with 0.5); `metadata` keys are set (replacing
// any copied value).
struct Edit {
  std::string arch;
  std::function<bool(const std::string&)> keep = [](const std::string&) { return true; };
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
  std::map<std::string, GgufValue> metadata;
};

struct EditedFile {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const GgufFile> file;
};

std::unique_ptr<EditedFile> edited(const GgufFile& src, const Edit& edit) {
  const std::string old_arch = **src.get_string("general.architecture");
  GgufWriter w;
  for (const auto& [key, value] : edit.metadata) w.add(key, value);
  for (const auto& [key, value] : src.metadata()) {
    const std::string renamed = key.starts_with(old_arch + ".") ? edit.arch + key.substr(old_arch.size()) : key;
    if (edit.metadata.contains(renamed)) continue;
    w.add(renamed, key == "general.architecture" ? gguf_string(edit.arch) : value);
  }
  for (const GgufTensor& t : src.tensors()) {
    if (!edit.keep(t.name)) continue;
    std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
    const std::span<const uint8_t> data(t.data, t.nbytes);
    w.add_tensor({t.name, t.type, shape, [data](GgufDataSink& sink) { return sink.write(data); }});
  }
  for (const auto& [name, shape] : edit.extra) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto values = std::make_shared<std::vector<float>>(n, 0.5f);
    w.add_tensor({name, DType::F32, shape, [values](GgufDataSink& sink) {
                    return sink.write({reinterpret_cast<const uint8_t*>(values->data()), values->size() * 4});
                  }});
  }
  auto out = std::make_unique<EditedFile>();
  auto bytes = w.write_buffer();
  EXPECT_TRUE(bytes.ok()) << (bytes.ok() ? "" : bytes.error().message);
  out->bytes = std::move(*bytes);
  auto file = GgufFile::parse(out->bytes, "edited.gguf");
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  out->file = std::make_shared<const GgufFile>(std::move(*file));
  return out;
}

std::string load_error(const Edit& edit, const std::string& from_arch) {
  const auto e = edited(small_model(from_arch), edit);
  auto model = Model::load(e->file);
  EXPECT_FALSE(model.ok());
  return model.ok() ? "" : model.error().message;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ModelLoadErrors, UnknownArchitectureListsTheSupportedOnes) {
  const std::string message = load_error({.arch = "gemma"}, "llama");
  EXPECT_TRUE(contains(message, "edited.gguf: architecture 'gemma' is not supported")) << message;
  EXPECT_TRUE(contains(message,
                       "(supported: bert, gemma2, gemma3, gemma4, gpt-oss, llama, mistral, nomic-bert, phi3, qwen2, "
                       "qwen3, qwen35, qwen35moe, qwen3moe, qwen3next, smollm)"))
      << message;
  EXPECT_EQ(ModelConfig::supported_architectures(),
            "bert, gemma2, gemma3, gemma4, gpt-oss, llama, mistral, nomic-bert, phi3, qwen2, qwen3, qwen35, qwen35moe, "
            "qwen3moe, qwen3next, smollm");
}

// qwen35's DeltaNet keys are required (as llama.cpp requires them); an inner size that is not heads × state size,
// M-RoPE sections that leave a rotated pair to the non-text section, and MTP layouts it cannot serve are refused by
// name.
TEST(ModelLoadErrors, Qwen35HybridKeysAreChecked) {
  const std::string missing = load_error({.arch = "qwen35", .metadata = {{"qwen35.ssm.state_size", gguf_u32(0)}}},
                                         "qwen35");
  EXPECT_TRUE(contains(missing, "qwen35.ssm.state_size")) << missing;
  const std::string inner = load_error({.arch = "qwen35", .metadata = {{"qwen35.ssm.inner_size", gguf_u32(100)}}},
                                       "qwen35");
  EXPECT_TRUE(contains(inner, "ssm.inner_size 100 is not time_step_rank")) << inner;
  std::vector<GgufValue> sections;
  for (int64_t v : {0, 2, 0, 0}) sections.push_back(gguf_int(GgufType::INT32, v));
  const std::string rope = load_error(
      {.arch = "qwen35", .metadata = {{"qwen35.rope.dimension_sections", gguf_array(GgufType::INT32, sections)}}},
      "qwen35");
  EXPECT_TRUE(contains(rope, "rope.dimension_sections")) << rope;
  // Multi-token-prediction blocks load as nothing (mtp_test.cpp), but not when they would be every block (an
  // MTP draft head alone), nor on an architecture whose MTP layout Hearth does not know.
  const std::string mtp_only =
      load_error({.arch = "qwen35", .metadata = {{"qwen35.nextn_predict_layers", gguf_u32(1000)}}}, "qwen35");
  EXPECT_TRUE(contains(mtp_only, "'qwen35.nextn_predict_layers' = 1000 leaves none of block_count")) << mtp_only;
  const std::string mtp_qwen3 =
      load_error({.arch = "qwen3", .metadata = {{"qwen3.nextn_predict_layers", gguf_u32(1)}}}, "qwen3");
  EXPECT_TRUE(contains(mtp_qwen3, "supported for qwen35, qwen35moe and qwen3next only")) << mtp_qwen3;
}

// attention.recurrent_layers, as llama.cpp's converter writes it from the checkpoint's layer_types (one bool per
// block, the multi-token-prediction blocks false), is read against full_attention_interval (2 here: block 0 Gated
// DeltaNet, 1 attention): the interval's own pattern loads, with or without an MTP block after the layers (its
// tensors bound to nothing), and any other pattern is refused naming the block.
TEST(ModelLoadErrors, Qwen35RecurrentLayersMustFollowTheInterval) {
  auto flags = [](std::vector<bool> v) {
    std::vector<GgufValue> items;
    for (bool b : v) items.push_back(gguf_bool(b));
    return gguf_array(GgufType::BOOL, std::move(items));
  };
  const auto same =
      edited(small_model("qwen35"),
             {.arch = "qwen35", .metadata = {{"qwen35.attention.recurrent_layers", flags({true, false})}}});
  auto model = Model::load(same->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const auto mtp =
      edited(small_model("qwen35"), {.arch = "qwen35",
                                     .extra = {{"blk.2.nextn.eh_proj.weight", {128, 64}}},
                                     .metadata = {{"qwen35.block_count", gguf_u32(3)},
                                                  {"qwen35.nextn_predict_layers", gguf_u32(1)},
                                                  {"qwen35.attention.recurrent_layers", flags({true, false, false})}}});
  auto with_mtp = Model::load(mtp->file);
  ASSERT_TRUE(with_mtp.ok()) << with_mtp.error().message;
  EXPECT_EQ((*with_mtp)->config().n_layers, 2);
  EXPECT_EQ((*with_mtp)->config().n_nextn_layers, 1);
  const std::string other = load_error(
      {.arch = "qwen35", .metadata = {{"qwen35.attention.recurrent_layers", flags({false, false})}}}, "qwen35");
  EXPECT_TRUE(contains(other, "marks block 0 attention where full_attention_interval 2 makes it recurrent")) << other;
  const std::string recurrent_mtp =
      load_error({.arch = "qwen35",
                  .metadata = {{"qwen35.block_count", gguf_u32(3)},
                               {"qwen35.nextn_predict_layers", gguf_u32(1)},
                               {"qwen35.attention.recurrent_layers", flags({true, false, true})}}},
                 "qwen35");
  EXPECT_TRUE(contains(recurrent_mtp,
                       "marks block 2 recurrent where full_attention_interval 2 makes it a "
                       "multi-token-prediction block"))
      << recurrent_mtp;
  const std::string length =
      load_error({.arch = "qwen35", .metadata = {{"qwen35.attention.recurrent_layers", flags({true})}}}, "qwen35");
  EXPECT_TRUE(contains(length, "must be an array of one bool per layer (2)")) << length;
}

// qwen35moe's shared expert is required, tensor by tensor, on recurrent and attention layers alike, and its width is
// expert_shared_feed_forward_length: a file whose key disagrees with the tensors is refused naming the tensor.
TEST(ModelLoadErrors, Qwen35MoeSharedExpertIsRequired) {
  auto model = Model::load(edited(small_model("qwen35moe"), {.arch = "qwen35moe"})->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().moe.shared_ffn_dim, 128);
  for (const char* name : {"blk.0.ffn_gate_inp_shexp.weight", "blk.1.ffn_down_shexp.weight"}) {
    const std::string n = name;
    const std::string missing =
        load_error({.arch = "qwen35moe", .keep = [n](const std::string& t) { return t != n; }}, "qwen35moe");
    EXPECT_TRUE(contains(missing, "missing tensor '" + n + "'")) << missing;
  }
  const std::string width = load_error(
      {.arch = "qwen35moe", .metadata = {{"qwen35moe.expert_shared_feed_forward_length", gguf_u32(64)}}}, "qwen35moe");
  EXPECT_TRUE(contains(width, "tensor 'blk.0.ffn_gate_shexp.weight' has shape [64, 128, 1, 1], expected [64, 64]"))
      << width;
}

// qwen3next loads with its fused DeltaNet projections (ssm_in, ssm_ba), each required by name, and its shared expert.
TEST(ModelLoadErrors, Qwen3NextFusedProjectionsAreRequired) {
  auto model = Model::load(edited(small_model("qwen3next"), {.arch = "qwen3next"})->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_TRUE((*model)->config().delta_net.grouped_heads);
  EXPECT_EQ((*model)->config().moe.shared_ffn_dim, 128);
  for (const char* name : {"blk.0.ssm_in.weight", "blk.0.ssm_ba.weight", "blk.1.ffn_up_shexp.weight"}) {
    const std::string n = name;
    const std::string missing =
        load_error({.arch = "qwen3next", .keep = [n](const std::string& t) { return t != n; }}, "qwen3next");
    EXPECT_TRUE(contains(missing, "missing tensor '" + n + "'")) << missing;
  }
}

TEST(ModelLoadErrors, MissingRequiredTensorIsNamed) {
  const auto drop = [](std::string name) { return [name](const std::string& t) { return t != name; }; };
  const std::vector<std::tuple<std::string, std::string>> cases = {
      {"llama", "blk.1.ffn_up.weight"},
      {"llama", "output_norm.weight"},
      {"qwen2", "blk.1.attn_k.bias"},
      {"qwen2", "blk.0.attn_q.bias"},
      {"qwen3", "blk.0.attn_q_norm.weight"},
      {"qwen3", "blk.1.attn_k_norm.weight"},
      {"phi3", "blk.0.attn_qkv.weight"},
      {"phi3", "blk.1.ffn_up.weight"},
      {"gemma2", "blk.0.post_attention_norm.weight"},
      {"gemma2", "blk.1.post_ffw_norm.weight"},
      {"gemma3", "blk.1.attn_k_norm.weight"},
      {"gemma3", "blk.0.post_ffw_norm.weight"},
      {"qwen3moe", "blk.0.ffn_gate_inp.weight"},
      {"qwen3moe", "blk.1.ffn_down_exps.weight"},
      {"qwen35", "blk.0.ssm_a"},
      {"qwen35", "blk.0.ssm_conv1d.weight"},
      {"qwen35", "blk.0.attn_gate.weight"},
      {"qwen35", "blk.1.attn_q_norm.weight"},
      {"qwen35", "blk.1.post_attention_norm.weight"},
  };
  for (const auto& [arch, tensor] : cases) {
    const std::string message = load_error({.arch = arch, .keep = drop(tensor)}, arch);
    EXPECT_TRUE(contains(message, "edited.gguf: missing tensor '" + tensor + "'")) << arch << ": " << message;
  }
  // The llama family's biases are optional, but all three or none.
  const std::string partial = load_error({.arch = "llama", .keep = drop("blk.0.attn_v.bias")}, "qwen2");
  EXPECT_TRUE(contains(partial, "missing tensor 'blk.0.attn_v.bias'")) << partial;
}

// qwen3moe's expert counts: more used than there are is refused naming both keys; an expert width that the expert
// tensors do not have is refused naming the tensor and both shapes.
TEST(ModelLoadErrors, Qwen3MoeExpertsAreChecked) {
  const std::string used = load_error({.arch = "qwen3moe", .metadata = {{"qwen3moe.expert_used_count", gguf_u32(5)}}},
                                      "qwen3moe");
  EXPECT_TRUE(contains(used, "edited.gguf: qwen3moe.expert_used_count 5 and expert_count 4 need 1 <= used <= count"))
      << used;
  const std::string width = load_error(
      {.arch = "qwen3moe", .metadata = {{"qwen3moe.expert_feed_forward_length", gguf_u32(64)}}}, "qwen3moe");
  EXPECT_TRUE(contains(width, "tensor 'blk.0.ffn_gate_exps.weight' has shape [64, 32, 4, 1], expected [64, 64, 4]"))
      << width;
  auto model = Model::load(edited(small_model("qwen3moe"), {.arch = "qwen3moe"})->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const MoeRouting& r = (*model)->config().moe;
  EXPECT_EQ(r.n_expert, 4);
  EXPECT_EQ(r.n_used, 2);
  EXPECT_EQ(r.ffn_dim, 32);
  EXPECT_TRUE(r.norm_weights);
  EXPECT_TRUE((*model)->config().qk_norm);
}

TEST(ModelLoadErrors, UnknownTensorIsNamed) {
  const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> cases = {
      {"qwen2", "rope_freqs.weight", {8}},              // Llama 3.1's RoPE divisors: llama family only
      {"phi3", "blk.0.ffn_gate.weight", {64, 128}},     // phi3's gate lives in its fused ffn_up
      {"llama", "blk.0.attn_q_norm.weight", {16}},      // qwen3's q norm in a llama file
      {"qwen2", "blk.1.ffn_gate_inp.weight", {64, 4}},  // a mixture-of-experts router
      {"qwen3", "blk.0.attn_q.bias", {64}},             // qwen3 has no biases
      {"gemma2", "output.weight", {64, 512}},           // gemma's output is always token_embd (llama.cpp)
      {"gemma2", "blk.0.attn_q_norm.weight", {16}},     // gemma2 has no q/k norms
      {"qwen3moe", "blk.0.ffn_gate.weight", {64, 128}}, // a dense FFN beside the experts
  };
  for (const auto& [arch, tensor, shape] : cases) {
    const std::string message = load_error({.arch = arch, .extra = {{tensor, shape}}}, arch);
    EXPECT_TRUE(contains(message, "edited.gguf: unknown tensor '" + tensor + "' for architecture '" + arch + "'"))
        << message;
  }
}

// What gemma4 does not compute is refused by name: a fused attn_qkv or a router tensor in a dense file, experts
// announced (expert_count) without their tensors, and a shared-KV split that leaves fewer than two layers with K/V
// (llama.cpp asserts on it too).
TEST(ModelLoadErrors, Gemma4RefusesWhatItDoesNotCompute) {
  const std::string moe = load_error({.arch = "gemma4",
                                      .metadata = {{"gemma4.expert_count", gguf_u32(4)},
                                                   {"gemma4.expert_used_count", gguf_u32(2)},
                                                   {"gemma4.expert_feed_forward_length", gguf_u32(32)}}},
                                     "gemma4");
  EXPECT_TRUE(contains(moe, "missing tensor 'blk.0.ffn_gate_inp.weight'")) << moe;
  for (const auto& [tensor, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"blk.0.attn_qkv.weight", {64, 96}}, {"blk.1.ffn_gate_inp.weight", {64, 4}}}) {
    const std::string message = load_error({.arch = "gemma4", .extra = {{tensor, shape}}}, "gemma4");
    EXPECT_TRUE(contains(message, "unknown tensor '" + tensor + "' for architecture 'gemma4'")) << message;
  }
  const std::string shared =
      load_error({.arch = "gemma4", .metadata = {{"gemma4.attention.shared_kv_layers", gguf_u32(1)}}}, "gemma4");
  EXPECT_TRUE(contains(shared, "attention.shared_kv_layers 1 leaves fewer than 2 of 2 layers with K/V")) << shared;
  auto model = Model::load(edited(small_model("gemma4"), {.arch = "gemma4"})->file);
  ASSERT_TRUE(model.ok()) << model.error().message;  // the unedited file loads
}

// Gemma's hyperparameters as llama.cpp reads them: gemma2's layers alternate local/global from layer 0 with
// default caps 50 and 30; gemma3 makes every sixth layer global and rotates the local ones with base 10000.
TEST(ModelLoad, GemmaHyperparameters) {
  auto gemma2 = ModelConfig::from_gguf(small_model("gemma2"));
  ASSERT_TRUE(gemma2.ok()) << gemma2.error().message;
  EXPECT_TRUE(gemma2->gemma);
  EXPECT_EQ(gemma2->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(gemma2->sliding_window, 4096);
  EXPECT_EQ(gemma2->n_ctx_train, 128) << "the window is a mask, it does not cap the context";
  EXPECT_TRUE(gemma2->is_local(0));
  EXPECT_FALSE(gemma2->is_local(1));
  EXPECT_EQ(gemma2->attn_softcap, 50.0f);
  EXPECT_EQ(gemma2->final_softcap, 30.0f);
  EXPECT_EQ(gemma2->attn_scale, 0.25f);
  EXPECT_EQ(gemma2->rope_freq_base_local, 0.0f);
  const auto defaults = edited(small_model("gemma2"), {.arch = "gemma2",
                                                       .keep = [](const std::string&) { return true; },
                                                       .metadata = {{"gemma2.attn_logit_softcapping", gguf_f32(7)}}});
  auto capped = ModelConfig::from_gguf(*defaults->file);
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->attn_softcap, 7.0f);
  auto gemma3 = ModelConfig::from_gguf(small_model("gemma3"));
  ASSERT_TRUE(gemma3.ok()) << gemma3.error().message;
  EXPECT_TRUE(gemma3->qk_norm);
  EXPECT_EQ(gemma3->attn_softcap, 0.0f);
  EXPECT_EQ(gemma3->final_softcap, 0.0f);
  EXPECT_EQ(gemma3->rope_freq_base_local, 10000.0f);
  for (int il = 0; il < 12; ++il) EXPECT_EQ(gemma3->is_local(il), il != 5 && il != 11) << il;
  auto llama = ModelConfig::from_gguf(small_model("llama"));
  ASSERT_TRUE(llama.ok());
  EXPECT_FALSE(llama->is_local(0));
}

TEST(ModelLoadErrors, WrongBiasShapeIsNamed) {
  const auto drop_q_bias = [](const std::string& t) { return t != "blk.0.attn_q.bias"; };
  const std::string message =
      load_error({.arch = "qwen2", .keep = drop_q_bias, .extra = {{"blk.0.attn_q.bias", {32}}}}, "qwen2");
  EXPECT_TRUE(contains(message, "tensor 'blk.0.attn_q.bias' has shape [32, 1, 1, 1], expected [64, 1]")) << message;
}

TEST(ModelLoadErrors, RopeScalingOtherThanLinearIsRefusedNamingTheKey) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"llama.rope.scaling.type", "yarn", "metadata 'llama.rope.scaling.type' = 'yarn' is not supported"},
      {"qwen2.rope.scaling.type", "longrope", "metadata 'qwen2.rope.scaling.type' = 'longrope' is not supported"},
  };
  for (const auto& [key, type, expected] : cases) {
    const std::string arch = key.substr(0, key.find('.'));
    const std::string message = load_error({.arch = arch, .metadata = {{key, gguf_string(type)}}}, arch);
    EXPECT_TRUE(contains(message, "edited.gguf: " + expected)) << message;
  }
  const std::string contradiction = load_error(
      {.arch = "llama",
       .metadata = {{"llama.rope.scaling.type", gguf_string("none")}, {"llama.rope.scaling.factor", gguf_f32(4)}}},
      "llama");
  EXPECT_TRUE(contains(contradiction, "'llama.rope.scaling.type' is 'none' but 'llama.rope.scaling.factor' is 4"))
      << contradiction;
  const std::string attn =
      load_error({.arch = "llama", .metadata = {{"llama.rope.scaling.attn_factor", gguf_f32(2)}}}, "llama");
  EXPECT_TRUE(contains(attn, "'llama.rope.scaling.attn_factor' = 2 is not supported")) << attn;
}

TEST(ModelLoadErrors, RopeFreqsOfTheWrongShapeAreNamed) {
  const std::string shape = load_error({.arch = "llama", .extra = {{"rope_freqs.weight", {16}}}}, "llama");
  EXPECT_TRUE(contains(shape, "tensor 'rope_freqs.weight' has shape [16, 1, 1, 1], expected [8, 1]")) << shape;
}

// LongRoPE's two factor tensors come together, each of rope_dim / 2 positive values; longrope as a scaling type is
// phi3's only.
TEST(ModelLoadErrors, Phi3LongRopeFactorsAreChecked) {
  const std::string long_name = "rope_factors_long.weight";
  const std::string short_name = "rope_factors_short.weight";
  for (const auto& [present, missing] : {std::pair{long_name, short_name}, std::pair{short_name, long_name}}) {
    const std::string message = load_error({.arch = "phi3", .extra = {{present, {8}}}}, "phi3");
    EXPECT_TRUE(contains(message, "LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight; '" +
                                      missing + "' is missing"))
        << message;
  }
  const std::string shape = load_error({.arch = "phi3", .extra = {{long_name, {8}}, {short_name, {16}}}}, "phi3");
  EXPECT_TRUE(contains(shape, "tensor 'rope_factors_short.weight' has shape [16, 1, 1, 1], expected [8, 1]")) << shape;
  const auto both = edited(small_model("phi3"),
                           {.arch = "phi3",
                            .extra = {{long_name, {8}}, {short_name, {8}}},
                            .metadata = {{"phi3.rope.scaling.type", gguf_string("longrope")},
                                         {"phi3.rope.scaling.attn_factor", gguf_f32(1.25f)},
                                         {"phi3.rope.scaling.original_context_length", gguf_u32(32)}}});
  auto model = Model::load(both->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_TRUE((*model)->config().rope_uses_long_factors());  // 128 > 32
  EXPECT_EQ((*model)->config().rope_attn_factor, 1.25f);
}

// phi3's window is a mask on every layer (llama.cpp's build_phi3), so it no longer caps the context.
TEST(ModelLoad, Phi3SlidingWindowMasksEveryLayer) {
  for (const uint32_t window : {64u, 128u, 4096u}) {
    const auto e = edited(small_model("phi3"),
                          {.arch = "phi3", .metadata = {{"phi3.attention.sliding_window", gguf_u32(window)}}});
    auto model = Model::load(e->file);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ((*model)->config().n_ctx_train, 128) << window;
    EXPECT_EQ((*model)->config().sliding_window, static_cast<int32_t>(window));
    EXPECT_TRUE((*model)->config().is_local(0));
    EXPECT_TRUE((*model)->config().is_local(1));
  }
}

// The logits of `tokens` from the engine, one token per forward, f32 KV; the last position's.
std::vector<float> engine_last_logits(const std::shared_ptr<const GgufFile>& file, const std::vector<int32_t>& tokens) {
  auto model = Model::load(file);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  const auto& c = (*model)->config();
  KvStorage kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 1);
  const std::vector<BlockId> table = {BlockId{0}};
  ThreadPool pool(1);
  std::vector<float> last;
  for (int32_t pos = 0; pos < static_cast<int32_t>(tokens.size()); ++pos) {
    const TokenId token{tokens[pos]};
    const BatchSequence seq{0, 1, pos, table, true};
    auto logits = (*model)->forward({{&token, 1}, {&seq, 1}}, kv, pool);
    last.assign(logits.begin(), logits.end());
  }
  return last;
}

// Largest |a - b| relative to the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return diff / scale;
}

// rope.scaling.type linear with factor 4 turns every pair a quarter as far: the engine agrees with the scalar
// reference, which reads the factor itself, and not with the unscaled file.
TEST(ModelLoad, LinearRopeScalingDividesEveryAngle) {
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 42, 300, 13, 7, 499, 100, 200};
  const auto scaled = edited(small_model("llama"), {.arch = "llama",
                                                    .metadata = {{"llama.rope.scaling.type", gguf_string("linear")},
                                                                 {"llama.rope.scaling.factor", gguf_f32(4)}}});
  const auto last = engine_last_logits(scaled->file, tokens);
  EXPECT_LT(relative_difference(last, test::reference_logits(*scaled->file, tokens).back()), 1e-4);
  EXPECT_GT(relative_difference(last, test::reference_logits(small_model("llama"), tokens).back()), 1e-2);
}

// A llama file with q/k/v biases (as some fine-tunes ship) computes with them: the engine agrees with the scalar
// reference, which adds them, and not with the reference without them.
TEST(ModelLoad, LlamaFamilyUsesOptionalBiases) {
  const auto e = edited(small_model("qwen2"), {.arch = "llama"});
  auto model = Model::load(e->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().rope_style, RopeStyle::kNormal);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 42};
  const auto last = engine_last_logits(e->file, tokens);
  EXPECT_LT(relative_difference(last, test::reference_logits(*e->file, tokens).back()), 1e-4);
  EXPECT_GT(relative_difference(last, test::reference_logits(*e->file, tokens, {.skip_qkv_bias = true}).back()), 1e-2);
}

}  // namespace
}  // namespace hearth

// What Model::load refuses, and how it says so: an unknown architecture (listing the supported ones), a missing
// required tensor and an unknown tensor (naming it: a tensor Hearth ignored would mean a different model). And the
// optional q/k/v biases of the llama family, which are used when present (checked against the scalar reference).

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
  c.out_path = std::string(HEARTH_TEST_TMP_DIR) + "/model_load_test_" + arch + "_" + std::to_string(getpid()) + ".gguf";  // one per process
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
  auto written = write_synthetic_model(c);
  EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error().message);
  auto file = GgufFile::open(c.out_path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  return files.emplace(arch, std::move(*file)).first->second;
}

// A copy of `src` in memory, named "edited.gguf": metadata keys renamed from `src`'s architecture to `arch`,
// tensors for which `keep` is true, then `extra` tensors (filled with 0.5).
struct Edit {
  std::string arch;
  std::function<bool(const std::string&)> keep = [](const std::string&) { return true; };
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
};

struct EditedFile {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const GgufFile> file;
};

std::unique_ptr<EditedFile> edited(const GgufFile& src, const Edit& edit) {
  const std::string old_arch = **src.get_string("general.architecture");
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    if (key == "general.architecture") {
      w.add(key, gguf_string(edit.arch));
    } else if (key.starts_with(old_arch + ".")) {
      w.add(edit.arch + key.substr(old_arch.size()), value);
    } else {
      w.add(key, value);
    }
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
  const std::string message = load_error({.arch = "gemma3"}, "llama");
  EXPECT_TRUE(contains(message, "edited.gguf: architecture 'gemma3' is not supported")) << message;
  EXPECT_TRUE(contains(message, "(supported: llama, mistral, qwen2, qwen3, smollm)")) << message;
  EXPECT_EQ(ModelConfig::supported_architectures(), "llama, mistral, qwen2, qwen3, smollm");
}

TEST(ModelLoadErrors, MissingRequiredTensorIsNamed) {
  const auto drop = [](std::string name) { return [name](const std::string& t) { return t != name; }; };
  const std::vector<std::tuple<std::string, std::string>> cases = {
      {"llama", "blk.1.ffn_up.weight"}, {"llama", "output_norm.weight"},       {"qwen2", "blk.1.attn_k.bias"},
      {"qwen2", "blk.0.attn_q.bias"},   {"qwen3", "blk.0.attn_q_norm.weight"}, {"qwen3", "blk.1.attn_k_norm.weight"},
  };
  for (const auto& [arch, tensor] : cases) {
    const std::string message = load_error({.arch = arch, .keep = drop(tensor)}, arch);
    EXPECT_TRUE(contains(message, "edited.gguf: missing tensor '" + tensor + "'")) << arch << ": " << message;
  }
  // The llama family's biases are optional, but all three or none.
  const std::string partial = load_error({.arch = "llama", .keep = drop("blk.0.attn_v.bias")}, "qwen2");
  EXPECT_TRUE(contains(partial, "missing tensor 'blk.0.attn_v.bias'")) << partial;
}

TEST(ModelLoadErrors, UnknownTensorIsNamed) {
  const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> cases = {
      {"llama", "rope_freqs.weight", {8}},              // Llama 3.1 RoPE scaling: not implemented, so refused
      {"llama", "blk.0.attn_q_norm.weight", {16}},      // qwen3's q norm in a llama file
      {"qwen2", "blk.1.ffn_gate_inp.weight", {64, 4}},  // a mixture-of-experts router
      {"qwen3", "blk.0.attn_q.bias", {64}},             // qwen3 has no biases
  };
  for (const auto& [arch, tensor, shape] : cases) {
    const std::string message = load_error({.arch = arch, .extra = {{tensor, shape}}}, arch);
    EXPECT_TRUE(contains(message, "edited.gguf: unknown tensor '" + tensor + "' for architecture '" + arch + "'"))
        << message;
  }
}

TEST(ModelLoadErrors, WrongBiasShapeIsNamed) {
  const auto drop_q_bias = [](const std::string& t) { return t != "blk.0.attn_q.bias"; };
  const std::string message =
      load_error({.arch = "qwen2", .keep = drop_q_bias, .extra = {{"blk.0.attn_q.bias", {32}}}}, "qwen2");
  EXPECT_TRUE(contains(message, "tensor 'blk.0.attn_q.bias' has shape [32, 1, 1, 1], expected [64, 1]")) << message;
}

// A llama file with q/k/v biases (as some fine-tunes ship) computes with them: the engine agrees with the scalar
// reference, which adds them, and not with the reference without them.
TEST(ModelLoad, LlamaFamilyUsesOptionalBiases) {
  const auto e = edited(small_model("qwen2"), {.arch = "llama"});
  auto model = Model::load(e->file);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().rope_style, RopeStyle::kNormal);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 42};
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
  const auto with = test::reference_logits(*e->file, tokens).back();
  const auto without = test::reference_logits(*e->file, tokens, {.skip_qkv_bias = true}).back();
  double diff_with = 0, diff_without = 0, scale = 0;
  for (size_t i = 0; i < last.size(); ++i) {
    diff_with = std::max(diff_with, std::abs(double{last[i]} - with[i]));
    diff_without = std::max(diff_without, std::abs(double{last[i]} - without[i]));
    scale = std::max(scale, std::abs(double{with[i]}));
  }
  EXPECT_LT(diff_with, 1e-4 * scale);
  EXPECT_GT(diff_without, 1e-2 * scale);
}

}  // namespace
}  // namespace hearth

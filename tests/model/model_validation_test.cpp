// Load-time validation of hyperparameters and cheap weight checks: stories260K rewritten with one
// metadata value or one tensor value changed must fail to load with an error naming the key or tensor.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/config.h"
#include "model/model.h"

namespace hearth {
namespace {

const std::string kStories = std::string(HEARTH_SHARED_DIR) + "/models/stories260K.gguf";

// stories260K with metadata `key` replaced by (or, when absent, given) `value`, and `patch` applied to the
// f32 data of tensor `tensor` (when named). Kept alive with its bytes.
struct Rewritten {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const GgufFile> file;
};

using FloatPatch = std::function<void(std::vector<float>&)>;

Rewritten rewrite(const std::string& key, std::optional<GgufValue> value, const std::string& tensor = {},
                  const FloatPatch& patch = {}) {
  auto src = GgufFile::open(kStories);
  EXPECT_TRUE(src) << src.error().message;
  auto shared_src = std::make_shared<GgufFile>(std::move(*src));
  GgufWriter w(GgufWriterOptions{3, shared_src->alignment()});
  bool replaced = false;
  for (const auto& [k, v] : shared_src->metadata()) {
    if (k == "general.alignment") continue;
    if (k == key && value) {
      w.add(k, *value);
      replaced = true;
    } else {
      w.add(k, v);
    }
  }
  if (!replaced && value) w.add(key, *value);
  for (const GgufTensor& t : shared_src->tensors()) {
    std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
    GgufTensorFill fill = [shared_src, t, tensor, patch](GgufDataSink& sink) -> Result<void> {
      if (t.name != tensor) return sink.write({t.data, t.nbytes});
      std::vector<float> values(t.nbytes / sizeof(float));
      std::memcpy(values.data(), t.data, t.nbytes);
      patch(values);
      return sink.write({reinterpret_cast<const uint8_t*>(values.data()), t.nbytes});
    };
    if (t.name == tensor) {
      EXPECT_EQ(t.type, DType::F32) << t.name;
    }
    w.add_tensor({t.name, t.type, shape, fill});
  }
  Rewritten out;
  auto bytes = w.write_buffer();
  EXPECT_TRUE(bytes) << bytes.error().message;
  out.bytes = std::move(*bytes);
  auto parsed = GgufFile::parse(out.bytes, "rewritten.gguf");
  EXPECT_TRUE(parsed) << parsed.error().message;
  out.file = std::make_shared<const GgufFile>(std::move(*parsed));
  return out;
}

void expect_load_error(const Rewritten& r, const std::string& part_a, const std::string& part_b) {
  auto model = Model::load(r.file);
  ASSERT_FALSE(model) << "loaded although it should not";
  EXPECT_NE(model.error().message.find(part_a), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find(part_b), std::string::npos) << model.error().message;
}

TEST(ModelValidation, UnchangedRewriteLoads) {
  const Rewritten r = rewrite("", std::nullopt);
  auto model = Model::load(r.file);
  ASSERT_TRUE(model) << model.error().message;
}

TEST(ModelValidation, RmsEpsilonMustBeFinitePositiveAndSmall) {
  const std::string key = "llama.attention.layer_norm_rms_epsilon";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [value, shown] : std::vector<std::pair<double, std::string>>{
           {nan, "nan"}, {-1.0, "-1"}, {inf, "inf"}, {-inf, "-inf"}, {0.0, "= 0"}, {2.0, "= 2"}}) {
    expect_load_error(rewrite(key, gguf_f32(static_cast<float>(value))), key, shown);
  }
  // FLOAT64 that narrows to 0 or to infinity as float.
  expect_load_error(rewrite(key, gguf_float(GgufType::FLOAT64, 1e-300)), key, "out of range");
}

TEST(ModelValidation, RopeFreqBaseMustBeFinitePositive) {
  const std::string key = "llama.rope.freq_base";
  for (float value :
       {std::numeric_limits<float>::quiet_NaN(), -10000.0f, 0.0f, std::numeric_limits<float>::infinity()}) {
    expect_load_error(rewrite(key, gguf_f32(value)), key, "out of range");
  }
}

TEST(ModelValidation, ShapesBeyondTheSupportedMaximaAreRefused) {
  // head_count 8 × key_length 2^20 would pass the old 2^30 bound per key but makes q_dim overflow int32.
  expect_load_error(rewrite("llama.attention.key_length", gguf_u32(1u << 20)), "key_length", "maximum");
  expect_load_error(rewrite("llama.block_count", gguf_u32(1u << 20)), "block_count", "maximum");
}

TEST(ModelValidation, NonFiniteNormOrSmallWeightIsRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_load_error(rewrite("", std::nullopt, "output_norm.weight", [&](auto& v) { v[3] = nan; }), "output_norm.weight",
                    "non-finite");
  expect_load_error(rewrite("", std::nullopt, "blk.2.ffn_norm.weight", [&](auto& v) { v[0] = -inf; }),
                    "blk.2.ffn_norm.weight", "non-finite");
  // stories260K's matrices are small (at most 512 × 64 for the embedding), so all of them are scanned.
  expect_load_error(rewrite("", std::nullopt, "token_embd.weight", [&](auto& v) { v[64 * 7 + 5] = inf; }),
                    "token_embd.weight", "row 7, column 5");
  expect_load_error(rewrite("", std::nullopt, "blk.0.attn_q.weight", [&](auto& v) { v.back() = nan; }),
                    "blk.0.attn_q.weight", "non-finite");
}

}  // namespace
}  // namespace hearth

// Dequantization against an independent quantizer: shared/models/synthetic holds one random F16 model and the
// same model converted by llama.cpp's llama-quantize to BF16, Q8_0, Q4_0, Q4_K_M and Q6_K. Every tensor we
// dequantize must reproduce its F16 source within that format's error, and a deliberately broken layout must
// miss by a wide margin (so the bounds really do detect a wrong layout).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

const std::string kModelDir = std::string(HEARTH_SHARED_DIR) + "/models/synthetic/";

// Per-format bounds, over blocks of `bound_block` elements: max |error| <= max_ratio × block absmax, and
// Σ error² / Σ source² <= max_nmse over each tensor. Measured with llama-quantize b4748 output (ratio × levels):
// BF16 0.996/256, Q8_0 0.55/127, Q4_0 0.994/8, Q4_K 1.12/15, Q6_K 1.02/63; NMSE 2.8e-6, 2.8e-5, 7.4e-3, 5.0e-3,
// 3.1e-4. A wrong layout gives ratios of 0.5 to 2 and NMSE of 0.2 to 2.
struct Bound {
  int64_t bound_block;
  double max_ratio;
  double max_nmse;
};

Bound bound_for(DType type) {
  switch (type) {
    case DType::BF16:
      return {1, 1.01 / 256, 1e-5};  // 8 significant bits: half an ulp is up to 2^-8 relative
    case DType::Q8_0:
      return {32, 0.6 / 127, 1e-4};  // half a step, plus the fp16 rounding of d over 127 steps
    case DType::Q4_0:
      return {32, 1.05 / 8, 1e-2};  // the absmax maps to -8, so +absmax clips to 7: one full step
    case DType::Q4_K:
      return {256, 1.5 / 15, 1e-2};
    case DType::Q6_K:
      return {256, 1.5 / 63, 1e-3};
    default:
      return {1, 0.0, 0.0};  // F32 and F16 tensors are copied unchanged
  }
}

struct TensorError {
  double max_ratio = 0.0;  // worst max |error| / block absmax
  double nmse = 0.0;
};

// Rewrites the raw bytes of one row before dequantizing it, to emulate a reader with a wrong layout.
using ByteTransform = std::function<void(uint8_t* row, size_t n_bytes)>;

TensorError compare_tensor(const GgufTensor& quant, const GgufTensor& source, const Bound& bound,
                           const ByteTransform& transform) {
  const int64_t n_cols = quant.ne[0];
  const int64_t n_rows = quant.num_elements() / n_cols;
  const size_t quant_row = row_bytes(quant.type, n_cols);
  const size_t source_row = row_bytes(source.type, n_cols);
  std::vector<uint8_t> bytes(quant_row);
  std::vector<float> got(static_cast<size_t>(n_cols));
  std::vector<float> want(static_cast<size_t>(n_cols));
  TensorError result;
  double err2 = 0.0;
  double ref2 = 0.0;
  for (int64_t r = 0; r < n_rows; ++r) {
    std::memcpy(bytes.data(), quant.data + r * quant_row, quant_row);
    if (transform) transform(bytes.data(), quant_row);
    dequantize_row(quant.type, bytes.data(), got.data(), n_cols);
    dequantize_row(source.type, source.data + r * source_row, want.data(), n_cols);
    for (int64_t b0 = 0; b0 < n_cols; b0 += bound.bound_block) {
      double absmax = 0.0;
      double max_err = 0.0;
      for (int64_t i = b0; i < b0 + bound.bound_block; ++i) {
        absmax = std::max(absmax, std::fabs(double{want[i]}));
        const double err = double{got[i]} - want[i];
        max_err = std::max(max_err, std::fabs(err));
        err2 += err * err;
        ref2 += double{want[i]} * want[i];
      }
      if (absmax > 0.0) result.max_ratio = std::max(result.max_ratio, max_err / absmax);
      if (absmax == 0.0 && max_err > 0.0) result.max_ratio = INFINITY;
    }
  }
  result.nmse = ref2 > 0.0 ? err2 / ref2 : (err2 > 0.0 ? INFINITY : 0.0);
  return result;
}

struct ModelPair {
  GgufFile source;
  GgufFile quant;
};

std::optional<ModelPair> open_pair(const std::string& quant_name) {
  const std::string source_path = kModelDir + "synth-tiny-f16.gguf";
  const std::string quant_path = kModelDir + quant_name;
  if (!std::filesystem::exists(source_path) || !std::filesystem::exists(quant_path)) return std::nullopt;
  auto source = GgufFile::open(source_path);
  auto quant = GgufFile::open(quant_path);
  EXPECT_TRUE(source.ok()) << (source.ok() ? "" : source.error().message);
  EXPECT_TRUE(quant.ok()) << (quant.ok() ? "" : quant.error().message);
  if (!source.ok() || !quant.ok()) return std::nullopt;
  return ModelPair{std::move(source).value(), std::move(quant).value()};
}

class DequantReferenceTest : public testing::TestWithParam<std::string> {};

TEST_P(DequantReferenceTest, EveryTensorMatchesItsF16Source) {
  auto pair = open_pair(GetParam());
  ASSERT_TRUE(pair.has_value()) << "synthetic models not found in " << kModelDir;
  int n_quantized = 0;
  for (const GgufTensor& tensor : pair->quant.tensors()) {
    const GgufTensor* source = pair->source.find_tensor(tensor.name);
    ASSERT_NE(source, nullptr) << tensor.name;
    for (int d = 0; d < 4; ++d) ASSERT_EQ(tensor.ne[d], source->ne[d]) << tensor.name;
    ASSERT_TRUE(quant_row_supported(tensor.type)) << tensor.name << " " << dtype_name(tensor.type);
    const Bound bound = bound_for(tensor.type);
    const TensorError error = compare_tensor(tensor, *source, bound, nullptr);
    EXPECT_LE(error.max_ratio, bound.max_ratio) << tensor.name << " " << dtype_name(tensor.type);
    EXPECT_LE(error.nmse, bound.max_nmse) << tensor.name << " " << dtype_name(tensor.type);
    if (bound.max_nmse > 0.0) ++n_quantized;
  }
  EXPECT_GE(n_quantized, 16) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(SyntheticModels, DequantReferenceTest,
                         testing::Values("synth-tiny-bf16.gguf", "synth-tiny-q8_0.gguf", "synth-tiny-q4_0.gguf",
                                         "synth-tiny-q4_k_m.gguf", "synth-tiny-q6_k.gguf"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(11, info.param.size() - 11 - 5);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Applies `transform` to every block of `block_bytes` bytes of a row.
ByteTransform per_block(size_t block_bytes, std::function<void(uint8_t*)> transform) {
  return [=](uint8_t* row, size_t n_bytes) {
    for (size_t off = 0; off < n_bytes; off += block_bytes) transform(row + off);
  };
}

struct BrokenLayout {
  std::string file;
  DType type;
  const char* what;
  ByteTransform transform;
};

// With a wrong layout the error is far outside the bound: at least 10× the NMSE bound and 3× the max-error bound.
TEST(DequantReferenceTest, BrokenLayoutsFailByAWideMargin) {
  const std::vector<BrokenLayout> cases = {
      {"synth-tiny-q4_0.gguf", DType::Q4_0, "nibbles swapped (element j in the high nibble)",
       per_block(sizeof(BlockQ4_0),
                 [](uint8_t* b) {
                   auto* block = reinterpret_cast<BlockQ4_0*>(b);
                   for (uint8_t& q : block->qs) q = static_cast<uint8_t>((q >> 4) | (q << 4));
                 })},
      {"synth-tiny-q8_0.gguf", DType::Q8_0, "quants read in reverse order",
       per_block(sizeof(BlockQ8_0),
                 [](uint8_t* b) {
                   auto* block = reinterpret_cast<BlockQ8_0*>(b);
                   std::reverse(block->qs, block->qs + 32);
                 })},
      {"synth-tiny-q4_k_m.gguf", DType::Q4_K, "scale bytes read as min bytes (wrong get_scale_min unpacking)",
       per_block(sizeof(BlockQ4_K),
                 [](uint8_t* b) {
                   auto* block = reinterpret_cast<BlockQ4_K*>(b);
                   std::swap_ranges(block->scales, block->scales + 4, block->scales + 4);
                 })},
      {"synth-tiny-q6_k.gguf", DType::Q6_K, "ql halves swapped (wrong element order)",
       per_block(sizeof(BlockQ6_K),
                 [](uint8_t* b) {
                   auto* block = reinterpret_cast<BlockQ6_K*>(b);
                   std::swap_ranges(block->ql, block->ql + 32, block->ql + 32);
                   std::swap_ranges(block->ql + 64, block->ql + 96, block->ql + 96);
                 })},
  };
  for (const BrokenLayout& c : cases) {
    auto pair = open_pair(c.file);
    ASSERT_TRUE(pair.has_value()) << "synthetic models not found in " << kModelDir;
    const Bound bound = bound_for(c.type);
    int n_checked = 0;
    for (const GgufTensor& tensor : pair->quant.tensors()) {
      if (tensor.type != c.type) continue;
      const TensorError correct = compare_tensor(tensor, *pair->source.find_tensor(tensor.name), bound, nullptr);
      const TensorError broken = compare_tensor(tensor, *pair->source.find_tensor(tensor.name), bound, c.transform);
      EXPECT_GT(broken.nmse, 10 * bound.max_nmse) << c.what << " " << tensor.name;
      EXPECT_GT(broken.max_ratio, 3 * bound.max_ratio) << c.what << " " << tensor.name;
      EXPECT_GT(broken.nmse, 50 * correct.nmse) << c.what << " " << tensor.name;
      ++n_checked;
    }
    EXPECT_GT(n_checked, 0) << c.file;
  }
}

// The matmul kernels on tensors written by the independent quantizer (its scale ranges, e.g. Q6_K scales down to
// -128, are not the ones our own quantizer produces): vector path vs scalar twin, and vs fp64 math.
TEST(DequantReferenceTest, MatmulOnIndependentlyQuantizedTensors) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  for (const char* file : {"synth-tiny-q8_0.gguf", "synth-tiny-q4_0.gguf", "synth-tiny-q4_k_m.gguf",
                           "synth-tiny-q6_k.gguf", "synth-tiny-bf16.gguf"}) {
    auto pair = open_pair(file);
    ASSERT_TRUE(pair.has_value()) << "synthetic models not found in " << kModelDir;
    std::set<DType> seen;
    for (const GgufTensor& tensor : pair->quant.tensors()) {
      if (tensor.n_dims != 2 || !matmul_supported(tensor.type) || !seen.insert(tensor.type).second) continue;
      const MatrixView w{tensor.type, tensor.ne[1], tensor.ne[0], tensor.data, row_bytes(tensor.type, tensor.ne[0])};
      const int64_t n_tokens = 5;
      std::mt19937 rng(3);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_tokens * w.n_cols));
      for (float& v : x) v = dist(rng);
      std::vector<float> fast(static_cast<size_t>(n_tokens * w.n_rows));
      std::vector<float> reference(fast.size());
      matmul(w, x.data(), n_tokens, fast.data(), pool, scratch);
      matmul_reference(w, x.data(), n_tokens, reference.data());
      std::vector<float> row(static_cast<size_t>(w.n_cols));
      double fast_err = 0.0;
      double math_err = 0.0;
      double norm = 0.0;
      for (int64_t r = 0; r < w.n_rows; ++r) {
        dequantize_row(w.type, w.data + r * w.row_stride, row.data(), w.n_cols);
        for (int64_t t = 0; t < n_tokens; ++t) {
          double want = 0.0;
          for (int64_t k = 0; k < w.n_cols; ++k) want += double{row[k]} * x[t * w.n_cols + k];
          const double got = reference[t * w.n_rows + r];
          fast_err += (fast[t * w.n_rows + r] - got) * (fast[t * w.n_rows + r] - got);
          math_err += (got - want) * (got - want);
          norm += want * want;
        }
      }
      EXPECT_LT(fast_err / norm, 1e-10) << file << " " << tensor.name;
      EXPECT_LT(math_err / norm, 1e-3) << file << " " << tensor.name;
    }
    EXPECT_FALSE(seen.empty()) << file;
  }
}

}  // namespace
}  // namespace hearth

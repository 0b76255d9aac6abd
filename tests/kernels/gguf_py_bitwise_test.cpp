// Dequantization bit for bit against gguf-py, an independent implementation: every tensor of every real
// quantization mix in ../shared/models/mixes/ (llama-quantize's output) is dequantized by Hearth's dequantize_row
// and the SHA-256 of its float32 values must equal gguf-py's, recorded beside the mix (with its first 8 values, so
// a mismatch says where). Then matmul on those tensors: the active ISA level against the scalar twin (bitwise where
// the tile is specified so), and the scalar twin against fp64 math on the dequantized weights.

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/weight_types.h"
#include "shared_mixes.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "util/sha256.h"

namespace hearth {
namespace {

// Whether the type's AVX2 tile reduces as its scalar twin (bitwise) or in fp32 lanes (to rounding only), as the
// weight-type table says (kernels/weight_types.h).
bool tile_is_bitwise(DType type) {
  return kernels::weight_type(type).avx2.reduction == kernels::Reduction::kAsTwin;
}

class GgufPyBitwiseTest : public testing::TestWithParam<mixes::Mix> {
 protected:
  void SetUp() override {
    auto file = GgufFile::open(mixes::gguf_path(GetParam()));
    ASSERT_TRUE(file.ok()) << file.error().message;
    file_ = std::make_unique<GgufFile>(std::move(*file));
  }

  std::unique_ptr<GgufFile> file_;
};

TEST_P(GgufPyBitwiseTest, DequantizeMatchesGgufPyBitForBit) {
  std::ifstream in(mixes::dequant_path(GetParam()));
  const nlohmann::json reference = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(reference.is_object()) << mixes::dequant_path(GetParam()) << " is not a JSON object";
  ASSERT_EQ(reference.size(), file_->tensors().size());
  std::set<DType> checked;
  for (const GgufTensor& tensor : file_->tensors()) {
    ASSERT_TRUE(dtype_info(tensor.type).compute_supported) << tensor.name << " " << dtype_name(tensor.type);
    ASSERT_TRUE(reference.contains(tensor.name)) << tensor.name;
    const nlohmann::json& want = reference.at(tensor.name);
    ASSERT_EQ(want.at("n").get<int64_t>(), tensor.num_elements()) << tensor.name;
    EXPECT_EQ(want.at("type").get<std::string>(), dtype_name(tensor.type)) << tensor.name;
    const int64_t n_cols = tensor.ne[0];
    const size_t stride = row_bytes(tensor.type, n_cols);
    std::vector<float> got(static_cast<size_t>(tensor.num_elements()));
    for (int64_t r = 0; r < tensor.num_elements() / n_cols; ++r) {
      dequantize_row(tensor.type, tensor.data + r * stride, got.data() + r * n_cols, n_cols);
    }
    // The head first, so a mismatch names its first differing value when it lies there.
    const nlohmann::json& head = want.at("head");
    for (size_t i = 0; i < head.size() && i < got.size(); ++i) {
      const float expected = head[i].get<float>();
      EXPECT_EQ(std::memcmp(&got[i], &expected, sizeof(float)), 0)
          << tensor.name << " " << dtype_name(tensor.type) << " element " << i << ": " << got[i] << " vs gguf-py "
          << expected;
    }
    // Little-endian float32 in file order, as gguf-py's values were hashed (x86-64 is little-endian).
    Sha256 sha;
    sha.update(got.data(), got.size() * sizeof(float));
    const Sha256Digest digest = sha.finish();
    EXPECT_EQ(to_hex(digest), want.at("sha256").get<std::string>())
        << tensor.name << " " << dtype_name(tensor.type) << ": Hearth's float32 values differ from gguf-py's";
    checked.insert(tensor.type);
  }
  for (DType type : GetParam().expected_types) {
    EXPECT_TRUE(checked.count(type)) << GetParam().name << " has no " << dtype_name(type) << " tensor";
  }
}

TEST_P(GgufPyBitwiseTest, MatmulMatchesScalarTwinAndMath) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::set<DType> seen;
  for (const GgufTensor& tensor : file_->tensors()) {
    if (tensor.n_dims != 2 || tensor.type == DType::F32 || !seen.insert(tensor.type).second) continue;
    const MatrixView w{tensor.type, tensor.ne[1], tensor.ne[0], tensor.data, row_bytes(tensor.type, tensor.ne[0])};
    const int64_t n_tokens = 5;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_tokens * w.n_cols));
    for (float& v : x) v = dist(rng);
    std::vector<float> fast(static_cast<size_t>(n_tokens * w.n_rows));
    std::vector<float> reference(fast.size());
    matmul(w, x.data(), n_tokens, fast.data(), pool, scratch);
    matmul_reference(w, x.data(), n_tokens, reference.data());
    double fast_err = 0.0;
    for (size_t i = 0; i < fast.size(); ++i) fast_err += double{fast[i] - reference[i]} * (fast[i] - reference[i]);
    if (tile_is_bitwise(tensor.type)) {
      EXPECT_EQ(std::memcmp(fast.data(), reference.data(), fast.size() * sizeof(float)), 0)
          << tensor.name << " " << dtype_name(tensor.type);
    }
    std::vector<float> row(static_cast<size_t>(w.n_cols));
    double err = 0.0;
    double norm = 0.0;
    for (int64_t r = 0; r < w.n_rows; ++r) {
      dequantize_row(w.type, w.data + r * w.row_stride, row.data(), w.n_cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        double want = 0.0;
        for (int64_t k = 0; k < w.n_cols; ++k) want += double{row[k]} * x[t * w.n_cols + k];
        const double got = reference[t * w.n_rows + r];
        err += (got - want) * (got - want);
        norm += want * want;
      }
    }
    EXPECT_LT(err / norm, 1e-3) << tensor.name << " " << dtype_name(tensor.type);
    EXPECT_LT(fast_err / norm, 1e-10) << tensor.name << " " << dtype_name(tensor.type);
  }
  EXPECT_FALSE(seen.empty());
}

INSTANTIATE_TEST_SUITE_P(PeerMixes, GgufPyBitwiseTest, testing::ValuesIn(mixes::kMixes),
                         [](const testing::TestParamInfo<mixes::Mix>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hearth

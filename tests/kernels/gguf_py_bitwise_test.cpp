// Dequantization bit for bit against gguf-py, an independent implementation: llama-quantize (the peer) makes each
// real quantization mix from synth-tiny-f16.gguf at test time, gguf-py dequantizes every tensor, and Hearth's
// dequantize_row must give exactly the same float32 bits. Then matmul on those tensors: the active ISA level
// against the scalar twin (bitwise where the tile is specified so), and the scalar twin against fp64 math on the
// dequantized weights. Skips, saying why, when the peer or python3-numpy is absent.

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "peer_quantize.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

// name -> values, read from the dump written by gguf_py_dequant.py.
std::map<std::string, std::vector<float>> read_dump(const std::string& path) {
  std::map<std::string, std::vector<float>> out;
  std::ifstream in(path, std::ios::binary);
  uint32_t name_len = 0;
  while (in.read(reinterpret_cast<char*>(&name_len), sizeof(name_len))) {
    std::string name(name_len, '\0');
    uint64_t count = 0;
    in.read(name.data(), name_len);
    in.read(reinterpret_cast<char*>(&count), sizeof(count));
    std::vector<float>& values = out[name];
    values.resize(count);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float)));
  }
  return out;
}

struct MixCase {
  const char* mix;                 // llama-quantize's name
  std::set<DType> expected_types;  // the quantized types the mix must contain (all must be checked)
};

const MixCase kMixes[] = {
    {"Q4_K_M", {DType::Q4_K, DType::Q6_K}},
    {"Q5_K_M", {DType::Q5_K, DType::Q6_K}},
    {"Q3_K_M", {DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}},
    {"IQ4_XS", {DType::IQ4_XS, DType::Q6_K}},
    {"Q5_0", {DType::Q5_0}},
    {"Q5_1", {DType::Q5_1}},
    {"Q4_1", {DType::Q4_1}},
    {"IQ4_NL", {DType::IQ4_NL}},
    {"Q2_K", {DType::Q2_K, DType::Q3_K}},
    {"Q8_0", {DType::Q8_0}},
    {"Q4_0", {DType::Q4_0}},
    {"BF16", {DType::BF16}},
};

// The Q8_0/Q4_0 and float tiles sum in vector lanes and agree with their scalar twins to rounding only (see
// matmul_test's kCases); every other type's tile is bitwise its scalar twin.
bool tile_is_bitwise(DType type) {
  return type != DType::F16 && type != DType::BF16 && type != DType::Q8_0 && type != DType::Q4_0;
}

class GgufPyBitwiseTest : public testing::TestWithParam<MixCase> {
 protected:
  void SetUp() override {
    const peer::PeerFile quantized = peer::quantize(GetParam().mix);
    if (quantized.absent) GTEST_SKIP() << quantized.message;
    ASSERT_FALSE(quantized.path.empty()) << quantized.message;
    auto file = GgufFile::open(quantized.path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    file_ = std::make_unique<GgufFile>(std::move(*file));
    path_ = quantized.path;
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  std::unique_ptr<GgufFile> file_;
  std::string path_;
};

TEST_P(GgufPyBitwiseTest, DequantizeMatchesGgufPyBitForBit) {
  const peer::PeerFile dump = peer::dequantize_with_gguf_py(path_);
  if (dump.absent) GTEST_SKIP() << dump.message;
  ASSERT_FALSE(dump.path.empty()) << dump.message;
  const auto reference = read_dump(dump.path);
  std::filesystem::remove(dump.path);
  ASSERT_EQ(reference.size(), file_->tensors().size());
  std::set<DType> checked;
  for (const GgufTensor& tensor : file_->tensors()) {
    ASSERT_TRUE(dtype_info(tensor.type).compute_supported) << tensor.name << " " << dtype_name(tensor.type);
    const auto it = reference.find(tensor.name);
    ASSERT_NE(it, reference.end()) << tensor.name;
    ASSERT_EQ(static_cast<int64_t>(it->second.size()), tensor.num_elements()) << tensor.name;
    const int64_t n_cols = tensor.ne[0];
    const size_t stride = row_bytes(tensor.type, n_cols);
    std::vector<float> got(static_cast<size_t>(tensor.num_elements()));
    for (int64_t r = 0; r < tensor.num_elements() / n_cols; ++r) {
      dequantize_row(tensor.type, tensor.data + r * stride, got.data() + r * n_cols, n_cols);
    }
    int64_t first_diff = -1;
    for (size_t i = 0; i < got.size() && first_diff < 0; ++i) {
      if (std::memcmp(&got[i], &it->second[i], sizeof(float)) != 0) first_diff = static_cast<int64_t>(i);
    }
    EXPECT_EQ(first_diff, -1) << tensor.name << " " << dtype_name(tensor.type) << " differs first at element "
                              << first_diff << ": " << got[first_diff] << " vs gguf-py " << it->second[first_diff];
    checked.insert(tensor.type);
  }
  for (DType type : GetParam().expected_types) {
    EXPECT_TRUE(checked.count(type)) << GetParam().mix << " has no " << dtype_name(type) << " tensor";
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

INSTANTIATE_TEST_SUITE_P(PeerMixes, GgufPyBitwiseTest, testing::ValuesIn(kMixes),
                         [](const testing::TestParamInfo<MixCase>& info) { return std::string(info.param.mix); });

}  // namespace
}  // namespace hearth

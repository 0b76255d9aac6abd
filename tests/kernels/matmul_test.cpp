// matmul: vector kernels against their scalar twins, the scalar path against plain math on dequantized
// weights, and the determinism contract (bitwise batch-, neighbour- and thread-invariance).

#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/packed.h"
#include "kernels/vec_dot.h"
#include "kernels/weight_types.h"
#include "random_blocks.h"
#include "tensor/quant.h"

namespace hearth {
namespace {

std::vector<float> gaussian(int64_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// A random weight matrix stored in `type`, and its exact values as fp32. Types without a quantizer get random
// blocks (random_blocks.h).
struct Weights {
  DType type;
  int64_t n_rows;
  int64_t n_cols;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, [n_rows, n_cols]

  MatrixView view() const { return {type, n_rows, n_cols, bytes.data(), row_bytes(type, n_cols)}; }
};

Weights make_weights(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  Weights w{type, n_rows, n_cols, {}, {}};
  const std::vector<float> source = gaussian(n_rows * n_cols, seed, 0.05f);
  const size_t stride = row_bytes(type, n_cols);
  w.bytes.resize(stride * static_cast<size_t>(n_rows));
  w.values.resize(source.size());
  if (!quant_row_supported(type)) test_data::fill_random_blocks(type, w.bytes.data(), w.bytes.size(), seed);
  for (int64_t r = 0; r < n_rows; ++r) {
    if (quant_row_supported(type)) quantize_row(type, source.data() + r * n_cols, w.bytes.data() + r * stride, n_cols);
    dequantize_row(type, w.bytes.data() + r * stride, w.values.data() + r * n_cols, n_cols);
  }
  return w;
}

// Restores the ISA level a test changed.
class IsaGuard {
 public:
  IsaGuard() : saved_(active_isa_level()) {}
  ~IsaGuard() { set_isa_level(saved_); }

 private:
  IsaLevel saved_;
};

double nmse(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0.0;
  double ref = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return err / ref;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

bool bitwise_equal(const float* a, const float* b, int64_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;  // memcmp may not see null, even for 0 bytes
}

// The levels above kScalar this CPU supports (HEARTH_MAX_ISA does not cap them: the tests set each one).
std::vector<IsaLevel> cpu_vector_levels() {
  std::vector<IsaLevel> levels;
  for (IsaLevel level : {IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni}) {
    if (isa_supported(level)) levels.push_back(level);
  }
  return levels;
}

// kScalar and every level above it this CPU supports.
std::vector<IsaLevel> cpu_levels() {
  std::vector<IsaLevel> levels = cpu_vector_levels();
  levels.insert(levels.begin(), IsaLevel::kScalar);
  return levels;
}

struct TypeCase {
  DType type;
  int64_t n_cols;
  double fast_vs_reference_nmse;  // vector kernel vs scalar twin (0: must be bitwise equal)
  double reference_vs_math_nmse;  // scalar twin vs fp64 math on dequantized weights and raw activations
};

// One case per row of the weight-type table. Columns: fp32 activations 516 (not a multiple of the 8-lane vectors);
// Q8_0 activations 608 (19 blocks: groups of 4 or 8 blocks in the AVX2 tiles, and a tail of 3); Q8_K activations
// 768 (3 super-blocks). A tile that reduces as its twin must match it bitwise; a lanes tile within an NMSE.
TypeCase case_of(const kernels::WeightType& row) {
  const DType act = row.activation->type;
  const bool as_twin = row.avx2.reduction == kernels::Reduction::kAsTwin;
  switch (act) {
    case DType::F32:
      return {row.type, 516, as_twin ? 0.0 : 1e-10, 1e-11};
    case DType::Q8_0:
      return {row.type, 608, as_twin ? 0.0 : 1e-11, 1e-4};
    default:
      return {row.type, 768, as_twin ? 0.0 : 1e-11, 1e-4};
  }
}

std::vector<TypeCase> table_cases() {
  std::vector<TypeCase> cases;
  for (const kernels::WeightType& row : kernels::weight_types()) cases.push_back(case_of(row));
  return cases;
}

std::string case_name(const testing::TestParamInfo<TypeCase>& info) {
  return std::string(dtype_name(info.param.type));
}

class MatmulTypeTest : public testing::TestWithParam<TypeCase> {};

void expect_odd_shapes_match(const TypeCase& c);

TEST_P(MatmulTypeTest, ReferenceMatchesDequantizedMath) {
  const TypeCase c = GetParam();
  const Weights w = make_weights(c.type, 37, c.n_cols, 11);
  const int64_t n_tokens = 5;
  const std::vector<float> x = gaussian(n_tokens * c.n_cols, 12, 1.0f);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.n_rows));
  matmul_reference(w.view(), x.data(), n_tokens, y.data());
  std::vector<double> want(y.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < w.n_rows; ++r) {
      double sum = 0.0;
      for (int64_t k = 0; k < c.n_cols; ++k) sum += double{w.values[r * c.n_cols + k]} * x[t * c.n_cols + k];
      want[t * w.n_rows + r] = sum;
    }
  }
  EXPECT_LT(nmse(y, want), c.reference_vs_math_nmse);
}

// At every vector level of this CPU.
TEST_P(MatmulTypeTest, FastKernelMatchesScalarTwin) {
  if (cpu_vector_levels().empty()) GTEST_SKIP() << "no vector ISA on this CPU";
  const TypeCase c = GetParam();
  IsaGuard guard;
  const Weights w = make_weights(c.type, 70, c.n_cols, 21);
  const int64_t n_tokens = 9;
  const std::vector<float> x = gaussian(n_tokens * c.n_cols, 22, 1.0f);
  std::vector<float> reference(static_cast<size_t>(n_tokens * w.n_rows));
  matmul_reference(w.view(), x.data(), n_tokens, reference.data());
  ThreadPool pool(2);
  MatmulScratch scratch;
  for (IsaLevel level : cpu_vector_levels()) {
    set_isa_level(level);
    SCOPED_TRACE(isa_level_name(level));
    std::vector<float> fast(reference.size());
    matmul(w.view(), x.data(), n_tokens, fast.data(), pool, scratch);
    if (c.fast_vs_reference_nmse == 0.0) {
      EXPECT_TRUE(bitwise_equal(fast.data(), reference.data(), static_cast<int64_t>(fast.size())));
    } else {
      EXPECT_LT(nmse(fast, to_double(reference)), c.fast_vs_reference_nmse);
    }
  }
}

TEST_P(MatmulTypeTest, ScalarLevelIsBitwiseTheReference) {
  const TypeCase c = GetParam();
  IsaGuard guard;
  set_isa_level(IsaLevel::kScalar);
  const Weights w = make_weights(c.type, 13, c.n_cols, 31);
  const int64_t n_tokens = 4;
  const std::vector<float> x = gaussian(n_tokens * c.n_cols, 32, 1.0f);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.n_rows));
  std::vector<float> reference(y.size());
  ThreadPool pool(2);
  MatmulScratch scratch;
  matmul(w.view(), x.data(), n_tokens, y.data(), pool, scratch);
  matmul_reference(w.view(), x.data(), n_tokens, reference.data());
  EXPECT_TRUE(bitwise_equal(y.data(), reference.data(), static_cast<int64_t>(y.size())));
}

// y[t][r] must not depend on n_tokens, on which tokens share the batch, or on the thread count. Every token is
// first computed alone on one thread; then inside batches of 1, 3, 7 and 64 tokens at varying offsets, on 1 and 2
// threads, at every level of this CPU. 37 rows exercise partial row tiles; 3 rows force the token-split path.
TEST_P(MatmulTypeTest, BitwiseInvariantToBatchAndThreads) {
  const TypeCase c = GetParam();
  IsaGuard guard;
  for (IsaLevel level : cpu_levels()) {
    set_isa_level(level);
    for (int64_t n_rows : {37, 3}) {
      const Weights w = make_weights(c.type, n_rows, c.n_cols, 41);
      const int64_t n_pool = 80;
      const std::vector<float> x = gaussian(n_pool * c.n_cols, 42, 1.0f);
      std::vector<float> alone(static_cast<size_t>(n_pool * n_rows));
      ThreadPool one(1);
      ThreadPool two(2);
      MatmulScratch scratch;
      for (int64_t t = 0; t < n_pool; ++t) {
        matmul(w.view(), x.data() + t * c.n_cols, 1, alone.data() + t * n_rows, one, scratch);
      }
      for (int64_t n_tokens : {1, 3, 7, 64}) {
        for (int64_t offset : {0, 5, 16}) {
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> y(static_cast<size_t>(n_tokens * n_rows));
            matmul(w.view(), x.data() + offset * c.n_cols, n_tokens, y.data(), *pool, scratch);
            ASSERT_TRUE(bitwise_equal(y.data(), alone.data() + offset * n_rows, n_tokens * n_rows))
                << isa_level_name(level) << " rows " << n_rows << " n_tokens " << n_tokens << " offset " << offset
                << " threads " << pool->num_threads();
          }
        }
      }
    }
  }
}

// Odd shapes against the scalar twin, at every level of this CPU: 13 rows (not a multiple of any row tile), 1, 3 and
// `many` tokens (at least 513, not a multiple of any token tile, and past one token chunk of
// matmul_token_chunk_bytes(), so the call runs in two chunks), with the columns of case_of. Then tile-vs-single-row
// identity: every row computed alone (a 1-row matrix) and every token alone must equal its element of the
// `many`-token, 13-row, 2-thread result bit for bit.
TEST_P(MatmulTypeTest, OddShapesMatchScalarTwinAndSingleRows) {
  const TypeCase c = GetParam();
  IsaGuard guard;
  for (IsaLevel level : cpu_levels()) {
    set_isa_level(level);
    SCOPED_TRACE(isa_level_name(level));
    expect_odd_shapes_match(c);
  }
}

void expect_odd_shapes_match(const TypeCase& c) {
  const int64_t n_rows = 13;
  const Weights w = make_weights(c.type, n_rows, c.n_cols, 51);
  ThreadPool two(2);
  ThreadPool one(1);
  MatmulScratch scratch;
  const int64_t fit =
      static_cast<int64_t>(matmul_token_chunk_bytes() / row_bytes(matmul_activation_type(c.type), c.n_cols));
  const int64_t many = std::max<int64_t>(513, fit + 5) | 1;  // odd: not a multiple of any token tile
  for (int64_t n_tokens : {int64_t{1}, int64_t{3}, many}) {
    const std::vector<float> x = gaussian(n_tokens * c.n_cols, 52 + static_cast<uint32_t>(n_tokens), 1.0f);
    std::vector<float> fast(static_cast<size_t>(n_tokens * n_rows));
    std::vector<float> reference(fast.size());
    matmul(w.view(), x.data(), n_tokens, fast.data(), two, scratch);
    matmul_reference(w.view(), x.data(), n_tokens, reference.data());
    if (c.fast_vs_reference_nmse == 0.0) {
      EXPECT_TRUE(bitwise_equal(fast.data(), reference.data(), static_cast<int64_t>(fast.size())))
          << "n_tokens " << n_tokens;
    } else {
      EXPECT_LT(nmse(fast, to_double(reference)), c.fast_vs_reference_nmse) << "n_tokens " << n_tokens;
    }
    if (n_tokens != many) continue;
    const size_t stride = row_bytes(c.type, c.n_cols);
    for (int64_t r = 0; r < n_rows; ++r) {
      const MatrixView row{c.type, 1, c.n_cols, w.bytes.data() + r * stride, stride};
      std::vector<float> y(static_cast<size_t>(n_tokens));
      matmul(row, x.data(), n_tokens, y.data(), one, scratch);
      for (int64_t t = 0; t < n_tokens; ++t) {
        ASSERT_TRUE(bitwise_equal(&y[t], &fast[t * n_rows + r], 1)) << "row " << r << " token " << t;
      }
    }
    for (int64_t t : {int64_t{0}, int64_t{2}, int64_t{256}, int64_t{512}}) {
      std::vector<float> y(static_cast<size_t>(n_rows));
      matmul(w.view(), x.data() + t * c.n_cols, 1, y.data(), one, scratch);
      ASSERT_TRUE(bitwise_equal(y.data(), &fast[t * n_rows], n_rows)) << "token " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTypeTest, testing::ValuesIn(table_cases()), case_name);

// Every computable type has an AVX2 tile: the equality tests above would also pass on the scalar fallback.
TEST(MatmulTest, EveryTypeHasAnAvx2Tile) {
  if (static_cast<int>(detected_isa_level()) < static_cast<int>(IsaLevel::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const kernels::WeightType& row : kernels::weight_types()) {
    EXPECT_NE(row.avx2.tile->fn, nullptr) << dtype_name(row.type);
    EXPECT_NE(&kernels::gguf_tile(row, IsaLevel::kAvx2), row.scalar.tile) << dtype_name(row.type);
  }
}

// MXFP4's scale is an E8M0 exponent, not an fp16: the quantizer's blocks above hold a narrow range of it. Random
// codes under exponents from the subnormal half-scales (e 0 and 1) to 2^71, with activations from 1e-3 to 1e3, give
// outputs down in the subnormals and far above the quantizer's; every level stays bitwise the twin.
TEST(MatmulTest, MXFP4AcrossTheExponentRangeIsBitwiseTheTwin) {
  IsaGuard guard;
  const int64_t n_rows = 19;
  const int64_t n_cols = 608;
  const int64_t n_tokens = 5;
  std::mt19937 rng(61);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_rows) * row_bytes(DType::MXFP4, n_cols));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() & 0xFF);
  auto* blocks = reinterpret_cast<BlockMXFP4*>(bytes.data());
  const int64_t n_blocks = n_cols / 32;
  for (int64_t b = 0; b < n_rows * n_blocks; ++b) {
    // Rows 0-2 all subnormal half-scales; elsewhere every fifth block one, the rest anything up to 2^71.
    const bool subnormal = b < 3 * n_blocks || b % 5 == 0;
    blocks[b].e = static_cast<uint8_t>(subnormal ? rng() % 2 : rng() % 200);
  }
  const MatrixView w{DType::MXFP4, n_rows, n_cols, bytes.data(), row_bytes(DType::MXFP4, n_cols)};
  std::vector<float> x = gaussian(n_tokens * n_cols, 62, 1.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < n_cols; ++k) x[t * n_cols + k] *= std::pow(10.0f, static_cast<float>(t % 3) * 3.0f - 3.0f);
  }
  std::vector<float> reference(static_cast<size_t>(n_tokens * n_rows));
  matmul_reference(w, x.data(), n_tokens, reference.data());
  bool subnormal = false;
  for (float v : reference) {
    ASSERT_TRUE(std::isfinite(v));
    subnormal |= std::fpclassify(v) == FP_SUBNORMAL;
  }
  EXPECT_TRUE(subnormal);
  ThreadPool pool(2);
  MatmulScratch scratch;
  for (IsaLevel level : cpu_levels()) {
    set_isa_level(level);
    std::vector<float> y(reference.size());
    matmul(w, x.data(), n_tokens, y.data(), pool, scratch);
    EXPECT_TRUE(bitwise_equal(y.data(), reference.data(), static_cast<int64_t>(y.size()))) << isa_level_name(level);
  }
}

// set_isa_level never leaves the kernels at a level whose instructions this CPU lacks: AVX512-VNNI does not imply
// AVX-VNNI (Ice Lake has the one and not the other), so a level is clamped to the best supported one below it.
TEST(MatmulTest, SetIsaLevelOnlyEverPicksASupportedLevel) {
  IsaGuard guard;
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni}) {
    set_isa_level(level);
    const IsaLevel got = active_isa_level();
    EXPECT_TRUE(isa_supported(got)) << isa_level_name(level);
    EXPECT_LE(static_cast<int>(got), static_cast<int>(level)) << isa_level_name(level);
    if (isa_supported(level)) {
      EXPECT_EQ(got, level) << isa_level_name(level);
    }
  }
  EXPECT_TRUE(isa_supported(IsaLevel::kScalar));
  EXPECT_TRUE(isa_supported(detected_isa_level()));
}

TEST(MatmulTest, ScratchGrowsOnlyWhenNeeded) {
  const Weights w = make_weights(DType::Q8_0, 8, 64, 51);
  const std::vector<float> x = gaussian(16 * 64, 52, 1.0f);
  std::vector<float> y(16 * 8);
  ThreadPool pool(1);
  MatmulScratch scratch;
  matmul(w.view(), x.data(), 16, y.data(), pool, scratch);
  const size_t capacity = scratch.capacity();
  EXPECT_GE(capacity, 16 * row_bytes(DType::Q8_0, 64));
  const uint8_t* buffer = scratch.reserve(0);
  matmul(w.view(), x.data(), 4, y.data(), pool, scratch);
  matmul(w.view(), x.data(), 16, y.data(), pool, scratch);
  EXPECT_EQ(scratch.capacity(), capacity);
  EXPECT_EQ(scratch.reserve(0), buffer);
}

// A Q8_0 weight of -128 (legal in a file, never produced by the quantizer) has no int8 negation; the vector kernel
// must still give the exact integer products, so it matches the scalar twin as closely as for ordinary weights.
TEST(MatmulTest, Q8_0MinusOneTwentyEightWeightsAreExact) {
  IsaGuard guard;
  set_isa_level(detected_isa_level());
  const int64_t n_rows = 5;
  const int64_t n_cols = 64;
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(n_rows * n_cols / kQK8_0));
  for (size_t b = 0; b < blocks.size(); ++b) {
    blocks[b].d = 0x2E66;  // fp16 0.1
    for (int i = 0; i < kQK8_0; ++i) {
      blocks[b].qs[i] = static_cast<int8_t>(i % 3 == 0 ? -128 : (i * 37 + b) % 255 - 127);
    }
  }
  const MatrixView w{DType::Q8_0, n_rows, n_cols, reinterpret_cast<const uint8_t*>(blocks.data()),
                     row_bytes(DType::Q8_0, n_cols)};
  const int64_t n_tokens = 4;
  const std::vector<float> x = gaussian(n_tokens * n_cols, 61, 1.0f);
  std::vector<float> fast(static_cast<size_t>(n_tokens * n_rows));
  std::vector<float> reference(fast.size());
  ThreadPool pool(1);
  MatmulScratch scratch;
  matmul(w, x.data(), n_tokens, fast.data(), pool, scratch);
  matmul_reference(w, x.data(), n_tokens, reference.data());
  EXPECT_LT(nmse(fast, to_double(reference)), 1e-11);
}

// The AVX2 activation quantizers write exactly the scalar quantizer's bytes: Gaussian rows, rows with exact
// rounding ties (k + 0.5 steps of the scale), an all-zero block, a block of one large value and huge magnitudes.
TEST(MatmulTest, Avx2ActivationQuantizerIsBytewiseTheScalarOne) {
  if (static_cast<int>(detected_isa_level()) < static_cast<int>(IsaLevel::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t n_cols = 1024;
  std::vector<std::vector<float>> rows = {gaussian(n_cols, 71, 1.0f), gaussian(n_cols, 72, 1e-3f),
                                          gaussian(n_cols, 73, 3e4f)};
  std::vector<float> ties(n_cols);
  for (int64_t i = 0; i < n_cols; ++i) ties[i] = (i % 32 == 0) ? 127.0f : static_cast<float>(i % 255 - 127) + 0.5f;
  rows.push_back(ties);
  std::vector<float> sparse(n_cols, 0.0f);
  sparse[300] = -5.0f;
  sparse[700] = 1e-30f;
  rows.push_back(sparse);
  std::vector<DType> activation_types;  // one weight type per quantized activation type of the table
  for (const kernels::WeightType& row : kernels::weight_types()) {
    if (row.activation->quantize_avx2 == nullptr) continue;
    bool seen = false;
    for (DType t : activation_types) seen = seen || matmul_activation_type(t) == row.activation->type;
    if (!seen) activation_types.push_back(row.type);
  }
  EXPECT_EQ(activation_types.size(), 2u);  // Q8_0 and Q8_K
  for (DType type : activation_types) {
    const size_t bytes = row_bytes(matmul_activation_type(type), n_cols);
    for (size_t k = 0; k < rows.size(); ++k) {
      std::vector<uint8_t> fast(bytes, 0xAA);
      std::vector<uint8_t> scalar(bytes, 0x55);
      ASSERT_TRUE(kernels::avx2_quantize_activation_row(type, rows[k].data(), fast.data(), n_cols));
      kernels::quantize_activation_row(type, rows[k].data(), scalar.data(), n_cols);
      EXPECT_EQ(fast, scalar) << dtype_name(type) << " row " << k;
    }
  }
  EXPECT_FALSE(kernels::avx2_quantize_activation_row(DType::F16, rows[0].data(), nullptr, n_cols));
}

TEST(MatmulTest, HonoursRowStride) {
  const Weights w = make_weights(DType::Q4_0, 6, 64, 61);
  const size_t stride = row_bytes(DType::Q4_0, 64);
  std::vector<uint8_t> padded(6 * (stride + 14));
  for (int r = 0; r < 6; ++r) std::memcpy(padded.data() + r * (stride + 14), w.bytes.data() + r * stride, stride);
  const MatrixView strided{DType::Q4_0, 6, 64, padded.data(), stride + 14};
  const std::vector<float> x = gaussian(3 * 64, 62, 1.0f);
  std::vector<float> y(18);
  std::vector<float> want(18);
  ThreadPool pool(2);
  MatmulScratch scratch;
  matmul(strided, x.data(), 3, y.data(), pool, scratch);
  matmul(w.view(), x.data(), 3, want.data(), pool, scratch);
  EXPECT_EQ(y, want);
}

// matmul_group gives every matrix bitwise what matmul gives it alone: matrices of one type sharing a quantized x and
// one pool call (packed where the CPU has the VNNI tiles), a different type in between (its own run), a matrix of
// 0 rows, few rows with many tokens (the token-split path), on 1 and 2 threads.
TEST(MatmulTest, GroupIsBitwiseSeparateCalls) {
  const int64_t n_cols = 768;
  const Weights a = make_weights(DType::Q8_0, 37, n_cols, 81);
  const Weights b = make_weights(DType::Q8_0, 5, n_cols, 82);
  const Weights c = make_weights(DType::Q4_K, 16, n_cols, 83);
  const Weights d = make_weights(DType::Q8_0, 3, n_cols, 84);
  std::vector<MatrixView> views = {a.view(), b.view(), c.view(), d.view(),
                                   MatrixView{DType::Q8_0, 0, n_cols, nullptr, row_bytes(DType::Q8_0, n_cols)}};
  std::vector<std::unique_ptr<PackedMatrix>> packed;
  for (MatrixView& v : views) {
    if (v.n_rows > 0 && packing_available(v.type)) {
      packed.push_back(pack_matrix(v));
      v.packed = packed.back().get();
    }
  }
  ThreadPool one(1);
  ThreadPool two(2);
  MatmulScratch scratch;
  for (int64_t n_tokens : {1, 3, 64}) {
    const std::vector<float> x = gaussian(n_tokens * n_cols, 85, 1.0f);
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<std::vector<float>> alone(views.size());
      std::vector<std::vector<float>> grouped(views.size());
      std::vector<MatmulOutput> outputs;
      for (size_t i = 0; i < views.size(); ++i) {
        alone[i].assign(static_cast<size_t>(n_tokens * views[i].n_rows), 0.0f);
        grouped[i].assign(alone[i].size(), -1.0f);
        if (views[i].n_rows > 0) matmul(views[i], x.data(), n_tokens, alone[i].data(), *pool, scratch);
      }
      for (size_t i = 0; i < 4; ++i) outputs.push_back({&views[i], grouped[i].data()});
      matmul_group(outputs, x.data(), n_tokens, *pool, scratch);
      const MatmulOutput pair[] = {{&views[4], grouped[4].data()}, {&views[3], grouped[3].data()}};
      matmul_group(pair, x.data(), n_tokens, *pool, scratch);
      for (size_t i = 0; i < views.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(alone[i].data(), grouped[i].data(), static_cast<int64_t>(alone[i].size())))
            << "matrix " << i << " tokens " << n_tokens << " threads " << pool->num_threads();
      }
    }
  }
}

// Row chunks go to the parts of a pool call by shares (each part's own run front to back, the rest taken from the
// back of others'): whatever the thread count, every output row is computed once, by one tile call, with the same
// bits. 3 threads split 24 chunks unevenly over three shares; 70 threads leave parts without a share of their own
// (at most 64 shares), which only take others' chunks; the 1,203 rows of two grouped matrices give every part many
// chunks, and a matrix boundary inside a chunk.
TEST(MatmulTest, EveryRowOnceWhateverTheThreadCount) {
  const int64_t n_cols = 256;
  const Weights a = make_weights(DType::Q4_K, 1200, n_cols, 91);
  const Weights b = make_weights(DType::Q4_K, 3, n_cols, 92);
  std::vector<MatrixView> views = {a.view(), b.view()};
  std::vector<std::unique_ptr<PackedMatrix>> packed;
  for (MatrixView& v : views) {
    if (packing_available(v.type)) {
      packed.push_back(pack_matrix(v));
      v.packed = packed.back().get();
    }
  }
  ThreadPool one(1);
  MatmulScratch scratch;
  for (int64_t n_tokens : {1, 9}) {
    const std::vector<float> x = gaussian(n_tokens * n_cols, 93, 1.0f);
    std::vector<std::vector<float>> want(views.size());
    for (size_t i = 0; i < views.size(); ++i) {
      want[i].assign(static_cast<size_t>(n_tokens * views[i].n_rows), 0.0f);
      matmul(views[i], x.data(), n_tokens, want[i].data(), one, scratch);
    }
    for (int threads : {3, 70}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> got(views.size());
      std::vector<MatmulOutput> outputs;
      for (size_t i = 0; i < views.size(); ++i) {
        got[i].assign(want[i].size(), std::numeric_limits<float>::quiet_NaN());
        outputs.push_back({&views[i], got[i].data()});
      }
      matmul_group(outputs, x.data(), n_tokens, pool, scratch);
      for (size_t i = 0; i < views.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(want[i].data(), got[i].data(), static_cast<int64_t>(want[i].size())))
            << "matrix " << i << " tokens " << n_tokens << " threads " << threads;
      }
    }
  }
}

TEST(MatmulTest, ActivationTypes) {
  EXPECT_EQ(matmul_activation_type(DType::F16), DType::F32);
  EXPECT_EQ(matmul_activation_type(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(matmul_activation_type(DType::Q6_K), DType::Q8_K);
  EXPECT_EQ(matmul_activation_type(DType::Q5_1), DType::Q8_0);
  EXPECT_EQ(matmul_activation_type(DType::IQ4_XS), DType::Q8_K);
  EXPECT_EQ(matmul_activation_type(DType::MXFP4), DType::Q8_0);  // ggml's vec_dot_type for MXFP4
  EXPECT_FALSE(matmul_supported(DType::IQ2_XS));
}

}  // namespace
}  // namespace hearth

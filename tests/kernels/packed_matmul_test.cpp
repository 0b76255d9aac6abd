// Packed weights (kernels/packed.h) with the AVX2, AVX-VNNI and AVX-512 tiles: every output bitwise the scalar
// reference, whatever the rows, tokens, tile cuts, threads and level; kScalar ignores the packed copy. Each level is
// tested where the CPU has it (HEARTH_MAX_ISA caps it too) and skipped, saying so, elsewhere.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/matmul.h"
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

// Quantized gaussian weights, or random blocks for the types Hearth reads but does not write.
std::vector<uint8_t> quantized(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  const size_t stride = row_bytes(type, n_cols);
  std::vector<uint8_t> bytes(stride * static_cast<size_t>(n_rows));
  if (!quant_row_supported(type)) {
    test_data::fill_random_blocks(type, bytes.data(), bytes.size(), seed);
    return bytes;
  }
  const std::vector<float> source = gaussian(n_rows * n_cols, seed, 0.05f);
  for (int64_t r = 0; r < n_rows; ++r)
    quantize_row(type, source.data() + r * n_cols, bytes.data() + r * stride, n_cols);
  return bytes;
}

// Columns of a test matrix: 11 blocks of 32 (an odd count, so a Q8_0 or Q4_0 group ends with a block alone; 16 ×
// that is even), or for the K-quants 3 super-blocks of 256.
int64_t test_cols(DType type) {
  return dtype_info(type).block_size == kQK_K ? 3 * kQK_K : 352;
}

// packed_block_at lays a group's blocks end to end: every byte of n_blocks × (quants + scales) belongs to exactly
// one block's quants or scales, the quants on 32-byte and the scales on 16-byte boundaries, and each block's
// bytes lie within its pair's share of the stream.
TEST(PackedMatmul, BlockPairsCoverTheGroupOnce) {
  for (size_t quant_bytes : {kernels::kPackedQ8_0QuantBytes, kernels::kPackedQ4_0QuantBytes}) {
    for (int64_t n_blocks : {1, 2, 3, 10, 11}) {
      const size_t share = quant_bytes + kernels::kPackedScaleBytes;
      std::vector<int> owner(static_cast<size_t>(n_blocks) * share, 0);
      for (int64_t b = 0; b < n_blocks; ++b) {
        const kernels::PackedBlockAt at = kernels::packed_block_at(n_blocks, b, quant_bytes);
        EXPECT_EQ(at.quants % 32, 0u) << "block " << b << " of " << n_blocks;
        EXPECT_EQ(at.scales % 16, 0u) << "block " << b << " of " << n_blocks;
        const size_t pair_begin = static_cast<size_t>(b / 2 * 2) * share;
        const size_t pair_end = std::min<size_t>(static_cast<size_t>(b / 2 * 2 + 2), n_blocks) * share;
        EXPECT_GE(at.quants, pair_begin);
        EXPECT_LE(at.scales + kernels::kPackedScaleBytes, pair_end);
        for (size_t i = 0; i < quant_bytes; ++i) ++owner[at.quants + i];
        for (size_t i = 0; i < kernels::kPackedScaleBytes; ++i) ++owner[at.scales + i];
      }
      EXPECT_EQ(std::count(owner.begin(), owner.end(), 1), static_cast<std::ptrdiff_t>(owner.size()))
          << quant_bytes << " quant bytes, " << n_blocks << " blocks";
    }
  }
}

class LevelGuard {
 public:
  LevelGuard() : saved_(active_isa_level()) {}
  ~LevelGuard() { set_isa_level(saved_); }

 private:
  IsaLevel saved_;
};

// The levels that read packed weights and that this CPU (and HEARTH_MAX_ISA) allows.
std::vector<IsaLevel> packed_levels() {
  std::vector<IsaLevel> levels;
  for (IsaLevel level : {IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni}) {
    if (static_cast<int>(level) <= static_cast<int>(active_isa_level()) && isa_supported(level)) {
      levels.push_back(level);
    }
  }
  return levels;
}

const char* const kNoPackedLevel = "this CPU has no AVX2: no packed path to test";

// The weight types with a packed layout in the weight-type table.
std::vector<DType> packed_types() {
  std::vector<DType> types;
  for (const kernels::WeightType& row : kernels::weight_types()) {
    if (row.packed != nullptr) types.push_back(row.type);
  }
  return types;
}

class PackedMatmulTest : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!packing_available(GetParam()) || packed_levels().empty()) GTEST_SKIP() << kNoPackedLevel;
  }
};

void expect_bitwise_reference(DType type);

// More tokens than one token chunk of the matmul holds for this type's activation rows (at least 513), so a call
// runs in two chunks, the second partial.
int64_t tokens_past_a_chunk(DType type, int64_t n_cols) {
  const size_t row = row_bytes(matmul_activation_type(type), n_cols);
  return std::max<int64_t>(513, static_cast<int64_t>(matmul_token_chunk_bytes() / row) + 5);
}

// 1..70 rows (full and partial groups of 8, one and two groups per tile), 1..15 tokens (every token-tile width of
// every level, 8 + 4 + a rest) and a count past one token chunk, 1 and 2 threads: bitwise the scalar reference.
TEST_P(PackedMatmulTest, BitwiseTheScalarReference) {
  LevelGuard guard;
  for (IsaLevel level : packed_levels()) {
    set_isa_level(level);
    SCOPED_TRACE(isa_level_name(level));
    expect_bitwise_reference(GetParam());
  }
}

void expect_bitwise_reference(DType type) {
  const int64_t n_cols = test_cols(type);
  ThreadPool one(1);
  ThreadPool two(2);
  MatmulScratch scratch;
  for (int64_t n_rows : {1, 3, 8, 13, 16, 70}) {
    const std::vector<uint8_t> bytes = quantized(type, n_rows, n_cols, static_cast<uint32_t>(n_rows));
    MatrixView w{type, n_rows, n_cols, bytes.data(), row_bytes(type, n_cols)};
    const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
    for (int64_t n_tokens :
         {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6}, int64_t{7}, int64_t{8}, int64_t{9},
          int64_t{12}, int64_t{13}, int64_t{15}, tokens_past_a_chunk(type, n_cols)}) {
      const std::vector<float> x = gaussian(n_tokens * n_cols, 7 + static_cast<uint32_t>(n_tokens), 1.0f);
      std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
      matmul_reference(w, x.data(), n_tokens, want.data());
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<float> got(want.size(), -1.0f);
        w.packed = packed.get();
        matmul(w, x.data(), n_tokens, got.data(), *pool, scratch);
        w.packed = nullptr;
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << dtype_name(type) << " rows " << n_rows << " tokens " << n_tokens << " threads " << pool->num_threads();
      }
    }
  }
}

// At kScalar the packed copy is not read: the result is the scalar tile's, packed or not.
TEST_P(PackedMatmulTest, ScalarReadsTheOriginal) {
  LevelGuard guard;
  set_isa_level(IsaLevel::kScalar);
  const DType type = GetParam();
  const int64_t n_rows = 24;
  const int64_t n_cols = test_cols(type);
  const std::vector<uint8_t> bytes = quantized(type, n_rows, n_cols, 3);
  MatrixView w{type, n_rows, n_cols, bytes.data(), row_bytes(type, n_cols)};
  const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
  const std::vector<float> x = gaussian(5 * n_cols, 4, 1.0f);
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> plain(5 * n_rows);
  std::vector<float> with_packed(plain.size());
  matmul(w, x.data(), 5, plain.data(), pool, scratch);
  w.packed = packed.get();
  matmul(w, x.data(), 5, with_packed.data(), pool, scratch);
  EXPECT_EQ(plain, with_packed);
}

INSTANTIATE_TEST_SUITE_P(Types, PackedMatmulTest, testing::ValuesIn(packed_types()),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// Every (type, packed level) pair of the packed types of Q8_K activations: the K-quants and IQ4_XS.
std::vector<std::pair<DType, IsaLevel>> q8_k_act_pairs() {
  std::vector<std::pair<DType, IsaLevel>> pairs;
  for (DType type : packed_types()) {
    if (matmul_activation_type(type) != DType::Q8_K) continue;
    for (IsaLevel level : packed_levels()) pairs.emplace_back(type, level);
  }
  return pairs;
}

// One matmul of x (n_tokens rows) through w's packed copy, bitwise against the scalar reference of the original.
void expect_packed_is_reference(MatrixView w, const PackedMatrix& packed, const std::vector<float>& x, int64_t n_tokens,
                                ThreadPool& pool, const std::string& what) {
  MatmulScratch scratch;
  std::vector<float> want(static_cast<size_t>(n_tokens * w.n_rows));
  std::vector<float> got(want.size(), -1.0f);
  w.packed = nullptr;
  matmul_reference(w, x.data(), n_tokens, want.data());
  w.packed = &packed;
  matmul(w, x.data(), n_tokens, got.data(), pool, scratch);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

class DecodePrefetchGuard {
 public:
  DecodePrefetchGuard() : saved_(decode_prefetch()) {}
  ~DecodePrefetchGuard() { set_decode_prefetch(saved_); }

 private:
  DecodePrefetch saved_;
};

// Whether a decode tile fetches ahead is speed only: 1 to 3 tokens over full and partial groups give the scalar
// reference's bits under every policy, at every packed level, with long rows (groups past any L1) and short ones.
TEST_P(PackedMatmulTest, DecodePrefetchChangesNoBit) {
  LevelGuard level_guard;
  DecodePrefetchGuard prefetch_guard;
  const DType type = GetParam();
  ThreadPool two(2);
  for (int64_t n_cols : {test_cols(type), 16 * test_cols(type)}) {
    const std::vector<uint8_t> bytes = quantized(type, 37, n_cols, 11);
    const MatrixView w{type, 37, n_cols, bytes.data(), row_bytes(type, n_cols)};
    const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
    for (IsaLevel level : packed_levels()) {
      set_isa_level(level);
      for (DecodePrefetch policy : {DecodePrefetch::kAuto, DecodePrefetch::kTileAhead, DecodePrefetch::kWithinL1,
                                    DecodePrefetch::kNear, DecodePrefetch::kNone}) {
        set_decode_prefetch(policy);
        for (int64_t n_tokens : {1, 2, 3}) {
          const std::vector<float> x = gaussian(n_tokens * n_cols, 3 + static_cast<uint32_t>(n_tokens), 1.0f);
          expect_packed_is_reference(w, *packed, x, n_tokens, two,
                                     std::string(isa_level_name(level)) + " policy " +
                                         std::to_string(static_cast<int>(policy)) + " cols " + std::to_string(n_cols) +
                                         " tokens " + std::to_string(n_tokens));
        }
      }
    }
  }
}

TEST(DecodePrefetch, EachPolicyFetchesAsFarAheadAsItSays) {
  DecodePrefetchGuard guard;
  constexpr size_t kFits = 1024;             // 4 KiB in flight fits every L1D
  constexpr size_t kPast = size_t{1} << 20;  // past any
  set_decode_prefetch(DecodePrefetch::kWithinL1);
  EXPECT_EQ(decode_fetch_distance(kFits), 2 * kFits);  // one tile: two groups
  EXPECT_EQ(decode_fetch_distance(kPast), 0u);
  set_decode_prefetch(DecodePrefetch::kNear);
  EXPECT_EQ(decode_fetch_distance(kFits), 2 * kFits);
  EXPECT_EQ(decode_fetch_distance(kPast), kDecodeNearFetchBytes);
  set_decode_prefetch(DecodePrefetch::kTileAhead);
  EXPECT_EQ(decode_fetch_distance(kPast), 2 * kPast);
  set_decode_prefetch(DecodePrefetch::kNone);
  EXPECT_EQ(decode_fetch_distance(kFits), 0u);
  set_decode_prefetch(
      DecodePrefetch::kAuto);  // every CPU's rule: one tile ahead for a group that fits, some fetch past
  EXPECT_EQ(decode_fetch_distance(kFits), 2 * kFits);
  EXPECT_GT(decode_fetch_distance(kPast), 0u);
  EXPECT_STREQ(decode_prefetch_name(DecodePrefetch::kNear), "near");
}

// Every bit of the K-quant and IQ4_XS blocks random (scales and mins up to 63, Q6_K scales down to -128, all high bits
// set somewhere), which the quantizer's output alone may not reach: still bitwise the reference.
TEST(PackedMatmul, KQuantRandomBitsAreExact) {
  LevelGuard guard;
  if (packed_levels().empty()) GTEST_SKIP() << kNoPackedLevel;
  for (auto [type, level] : q8_k_act_pairs()) {
    set_isa_level(level);
    const int64_t n_rows = 13;
    const int64_t n_cols = 4 * kQK_K;
    std::vector<uint8_t> bytes(row_bytes(type, n_cols) * n_rows);
    test_data::fill_random_blocks(type, bytes.data(), bytes.size(), 11);
    MatrixView w{type, n_rows, n_cols, bytes.data(), row_bytes(type, n_cols)};
    const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
    ThreadPool pool(2);
    for (int64_t n_tokens : {1, 4, 7}) {
      expect_packed_is_reference(
          w, *packed, gaussian(n_tokens * n_cols, 9, 1.0f), n_tokens, pool,
          std::string(dtype_name(type)) + " at " + isa_level_name(level) + " tokens " + std::to_string(n_tokens));
    }
  }
}

// Every quant and scale byte 0xFF (each weight at its type's largest unsigned value: Q4_K 15, Q5_K 31, Q6_K 63, Q3_K
// 7) with only the fp16 super-block scales made finite, against activations all +1 or all -1 (every byte ±127): the
// largest integer sums a tile can meet, which the AVX2 tiles' int16 partial sums (packed_tiles_q8_k_act.inc,
// kInt16Sums) must hold without saturating. Still bitwise the reference.
void set_finite_scales(DType type, uint8_t* bytes, size_t n_bytes) {
  const size_t block_bytes = dtype_info(type).block_bytes;
  const std::vector<test_data::Fp16Field> fields = test_data::fp16_fields(type);
  ASSERT_FALSE(fields.empty()) << dtype_name(type) << ": random_blocks.h names no fp16 scale field";
  const uint16_t scale = 0x2E66;  // fp16 0.1
  for (size_t b = 0; b + block_bytes <= n_bytes; b += block_bytes) {
    for (const test_data::Fp16Field& field : fields) std::memcpy(bytes + b + field.offset, &scale, sizeof(scale));
  }
}

TEST(PackedMatmul, KQuantLargestSumsAreExact) {
  LevelGuard guard;
  if (packed_levels().empty()) GTEST_SKIP() << kNoPackedLevel;
  for (auto [type, level] : q8_k_act_pairs()) {
    set_isa_level(level);
    const int64_t n_rows = 16;
    const int64_t n_cols = 2 * kQK_K;
    std::vector<uint8_t> bytes(row_bytes(type, n_cols) * n_rows, 0xFF);
    set_finite_scales(type, bytes.data(), bytes.size());
    MatrixView w{type, n_rows, n_cols, bytes.data(), row_bytes(type, n_cols)};
    const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
    ThreadPool pool(1);
    for (float sign : {1.0f, -1.0f}) {
      for (int64_t n_tokens : {1, 4}) {
        expect_packed_is_reference(w, *packed, std::vector<float>(static_cast<size_t>(n_tokens * n_cols), sign),
                                   n_tokens, pool,
                                   std::string(dtype_name(type)) + " at " + isa_level_name(level) + " tokens " +
                                       std::to_string(n_tokens) + " x " + std::to_string(sign));
      }
    }
  }
}

// A Q8_0 weight of -128 becomes the unsigned byte 0 in the packed layout; products stay exact.
TEST(PackedMatmul, Q8_0MinusOneTwentyEightIsExact) {
  if (packed_levels().empty()) GTEST_SKIP() << kNoPackedLevel;
  LevelGuard guard;
  const int64_t n_rows = 9;
  const int64_t n_cols = 64;
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(n_rows * n_cols / kQK8_0));
  for (size_t b = 0; b < blocks.size(); ++b) {
    blocks[b].d = 0x2E66;  // fp16 0.1
    for (int i = 0; i < kQK8_0; ++i)
      blocks[b].qs[i] = static_cast<int8_t>(i % 3 == 0 ? -128 : (i * 37 + b) % 255 - 127);
  }
  MatrixView w{DType::Q8_0, n_rows, n_cols, reinterpret_cast<const uint8_t*>(blocks.data()),
               row_bytes(DType::Q8_0, n_cols)};
  const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
  const std::vector<float> x = gaussian(3 * n_cols, 5, 1.0f);
  ThreadPool pool(1);
  for (IsaLevel level : packed_levels()) {
    set_isa_level(level);
    expect_packed_is_reference(w, *packed, x, 3, pool, isa_level_name(level));
  }
}

// MXFP4's packed scale is the E8M0 half-scale as bf16, exact for every exponent: random codes under all 256 of them,
// the subnormal half-scales (e 0 and 1, rows 0-2 wholly), and overflowing ones (e 250-255, rows 3-4 wholly), with
// activations of 1e3, 1e-3 and 1, give subnormal and infinite outputs; every packed level, in full and partial groups
// and every token-tile width, gives the twin's bits.
TEST(PackedMatmul, MXFP4AcrossTheExponentRangeIsBitwiseTheTwin) {
  if (!packing_available(DType::MXFP4) || packed_levels().empty()) GTEST_SKIP() << kNoPackedLevel;
  LevelGuard guard;
  const int64_t n_rows = 27;
  const int64_t n_cols = 352;
  const int64_t n_blocks = n_cols / kQK8_0;
  std::mt19937 rng(71);
  std::vector<uint8_t> bytes(static_cast<size_t>(n_rows) * row_bytes(DType::MXFP4, n_cols));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() & 0xFF);
  auto* blocks = reinterpret_cast<BlockMXFP4*>(bytes.data());
  for (int64_t b = 0; b < n_rows * n_blocks; ++b) {
    const int64_t row = b / n_blocks;
    blocks[b].e = static_cast<uint8_t>(row < 3 ? b % 2 : row < 5 ? 250 + b % 6 : (b * 7) % 256);
  }
  const MatrixView w{DType::MXFP4, n_rows, n_cols, bytes.data(), row_bytes(DType::MXFP4, n_cols)};
  const std::unique_ptr<PackedMatrix> packed = pack_matrix(w);
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 2, 3, 4, 7, 9, 13}) {
    std::vector<float> x = gaussian(n_tokens * n_cols, 72 + static_cast<uint32_t>(n_tokens), 1.0f);
    for (int64_t t = 0; t < n_tokens; ++t) {
      constexpr float kScales[3] = {1e3f, 1e-3f, 1.0f};  // token 0 overflows, token 1 goes subnormal
      const float scale = kScales[t % 3];
      for (int64_t k = 0; k < n_cols; ++k) x[t * n_cols + k] *= scale;
    }
    std::vector<float> reference(static_cast<size_t>(n_tokens * n_rows));
    matmul_reference(w, x.data(), n_tokens, reference.data());
    EXPECT_TRUE(std::any_of(reference.begin(), reference.end(), [](float v) { return std::isinf(v); }));
    if (n_tokens >= 2) {
      EXPECT_TRUE(
          std::any_of(reference.begin(), reference.end(), [](float v) { return std::fpclassify(v) == FP_SUBNORMAL; }));
    }
    for (IsaLevel level : packed_levels()) {
      set_isa_level(level);
      expect_packed_is_reference(w, *packed, x, n_tokens, pool,
                                 std::string(isa_level_name(level)) + " tokens " + std::to_string(n_tokens));
    }
  }
}

}  // namespace
}  // namespace hearth

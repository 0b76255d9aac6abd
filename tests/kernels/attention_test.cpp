// Flash-style paged attention and the KV dtypes: against the double-precision twin, against f32 KV, across
// ISA levels, and across query tilings (the bit-identical rule of the prefix cache).
#include "kernels/attention.h"
#include "kernels/kv_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu_isa.h"
#include "tensor/kv_dtype.h"

#include "../tensor/random_vector.h"  // tests/tensor

namespace hearth {
namespace {

using testing::random_vector;

// Paged K/V of one layer in a given dtype, with a scrambled block table, filled from float rows.
struct PagedKv {
  int32_t block_size, n_kv_heads, head_dim, n_positions;
  KvDtype dtype;
  size_t head_bytes, row_bytes;
  std::vector<BlockId> table;
  std::vector<uint8_t> bytes;

  PagedKv(KvDtype type, int32_t bs, int32_t heads, int32_t hd, int32_t n_pos, uint32_t seed)
      : block_size(bs), n_kv_heads(heads), head_dim(hd), n_positions(n_pos), dtype(type) {
    head_bytes = kv_head_bytes(type, hd);
    row_bytes = head_bytes * heads;
    const int32_t n_blocks = (n_pos + bs - 1) / bs;
    for (int32_t b = 0; b < n_blocks; ++b) table.push_back(BlockId{(b * 5 + 3) % n_blocks});  // 5 ⟂ n_blocks
    bytes.assign(static_cast<size_t>(n_blocks) * bs * row_bytes, 0);
    const auto values = random_vector(static_cast<size_t>(n_pos) * heads * hd, seed);
    for (int32_t p = 0; p < n_pos; ++p) {
      for (int32_t h = 0; h < heads; ++h) {
        kv_quantize_head(type, values.data() + (static_cast<size_t>(p) * heads + h) * hd,
                         const_cast<uint8_t*>(view().head(p, h)), hd);
      }
    }
  }
  PagedKvView view() const {
    return {bytes.data(), row_bytes * block_size, row_bytes, block_size, table, dtype, head_bytes, head_bytes};
  }
};

struct Shape {
  int32_t head_dim, group, block_size;
};

constexpr Shape kShapes[] = {{8, 2, 4}, {64, 1, 16}, {64, 4, 16}, {72, 1, 5}, {80, 3, 8}, {128, 2, 32}};

// Runs attention for `n_rows` rows starting at first_pos, head group `group` of KV head 1.
std::vector<float> run(const PagedKv& k, const PagedKv& v, const std::vector<float>& q, Shape s, int32_t first_pos,
                       int32_t n_rows, bool reference, int32_t window = 0, float softcap = 0.0f,
                       const float* sinks = nullptr) {
  const size_t stride = static_cast<size_t>(s.group) * s.head_dim;
  std::vector<float> out(n_rows * stride, NAN);
  const AttentionTile t{q.data(), stride,     out.data(), stride,  n_rows, first_pos, s.group,
                        1,        s.head_dim, 0.2f,       window,  softcap, 1,        sinks};
  if (reference) {
    attention_tile_reference(t, k.view(), v.view());
  } else {
    std::vector<float> scratch(attention_scratch_floats(s.head_dim, n_rows, s.group));
    attention_tile(t, k.view(), v.view(), scratch.data());
  }
  return out;
}

TEST(Attention, MatchesReferenceForEveryDtypeAndShape) {
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : kShapes) {
      const int32_t n_pos = 70;
      PagedKv k(type, s.block_size, 2, s.head_dim, n_pos, 1), v(type, s.block_size, 2, s.head_dim, n_pos, 2);
      for (auto [first_pos, n_rows] : {std::pair{0, 1}, {0, 3}, {5, 1}, {9, 17}, {40, 30}}) {
        const auto q = random_vector(static_cast<size_t>(n_rows) * s.group * s.head_dim, 3 + first_pos);
        const auto fast = run(k, v, q, s, first_pos, n_rows, false);
        const auto ref = run(k, v, q, s, first_pos, n_rows, true);
        for (size_t i = 0; i < fast.size(); ++i) {
          ASSERT_NEAR(fast[i], ref[i], 2e-5f) << kv_dtype_name(type) << " head_dim " << s.head_dim << " rows "
                                              << first_pos << "+" << n_rows << " at " << i;
        }
      }
    }
  }
}

// Sliding windows (Gemma's local layers) and logit soft-capping (Gemma 2) against the double-precision twin.
TEST(Attention, WindowAndSoftcapMatchReference) {
  for (KvDtype type : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0}) {
    for (Shape s : kShapes) {
      PagedKv k(type, s.block_size, 2, s.head_dim, 70, 21), v(type, s.block_size, 2, s.head_dim, 70, 22);
      for (auto [window, softcap] : {std::pair{1, 0.0f}, {3, 0.0f}, {16, 1.5f}, {33, 0.0f}, {0, 1.5f}}) {
        for (auto [first_pos, n_rows] : {std::pair{0, 3}, {9, 17}, {40, 30}}) {
          const auto q = random_vector(static_cast<size_t>(n_rows) * s.group * s.head_dim, 23 + first_pos);
          const auto fast = run(k, v, q, s, first_pos, n_rows, false, window, softcap);
          const auto ref = run(k, v, q, s, first_pos, n_rows, true, window, softcap);
          for (size_t i = 0; i < fast.size(); ++i) {
            ASSERT_NEAR(fast[i], ref[i], 2e-5f) << kv_dtype_name(type) << " head_dim " << s.head_dim << " window "
                                                << window << " softcap " << softcap << " at " << i;
          }
        }
      }
    }
  }
}

// Attention sinks (gpt-oss): a logit per query head joins the softmax's denominator with no value. The fast paths
// (every ISA level, with and without a window) match the double-precision twin; a sink far below every score
// changes nothing beyond rounding, one far above scales every output towards 0 (it has teeth).
TEST(Attention, SinksMatchReferenceAndShrinkTheOutput) {
  for (KvDtype type : {KvDtype::kF32, KvDtype::kF16}) {
    for (Shape s : kShapes) {
      PagedKv k(type, s.block_size, 2, s.head_dim, 70, 31), v(type, s.block_size, 2, s.head_dim, 70, 32);
      std::vector<float> sinks(s.group);
      for (int32_t g = 0; g < s.group; ++g) sinks[g] = 1.5f * static_cast<float>(g) - 1.0f;
      for (int32_t window : {0, 8}) {
        for (auto [first_pos, n_rows] : {std::pair{0, 1}, {9, 17}, {40, 30}}) {
          const auto q = random_vector(static_cast<size_t>(n_rows) * s.group * s.head_dim, 33 + first_pos);
          const auto fast = run(k, v, q, s, first_pos, n_rows, false, window, 0.0f, sinks.data());
          const auto ref = run(k, v, q, s, first_pos, n_rows, true, window, 0.0f, sinks.data());
          for (size_t i = 0; i < fast.size(); ++i) {
            ASSERT_NEAR(fast[i], ref[i], 2e-5f) << kv_dtype_name(type) << " head_dim " << s.head_dim << " window "
                                                << window << " at " << i;
          }
        }
      }
    }
  }
  const Shape s{64, 2, 16};
  PagedKv k(KvDtype::kF32, 16, 2, 64, 40, 34), v(KvDtype::kF32, 16, 2, 64, 40, 35);
  const auto q = random_vector(5 * 2 * 64, 36);
  const auto plain = run(k, v, q, s, 30, 5, false);
  const std::vector<float> low(2, -1e4f), high(2, 50.0f);
  const auto with_low = run(k, v, q, s, 30, 5, false, 0, 0.0f, low.data());
  const auto with_high = run(k, v, q, s, 30, 5, false, 0, 0.0f, high.data());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(with_low[i], plain[i], 1e-6f) << i;
    EXPECT_LT(std::fabs(with_high[i]), 1e-6f + 1e-9f * std::fabs(plain[i])) << i;
  }
}

// A window of 1 sees only the query's own key; a window covering every key changes no bit; soft-capping with a
// cap far above every score is a no-op within rounding, and a small cap flattens the softmax (it has teeth).
TEST(Attention, WindowEdgesAndSoftcapEffect) {
  const Shape s{64, 2, 16};
  PagedKv k(KvDtype::kF32, 16, 2, 64, 40, 24), v(KvDtype::kF32, 16, 2, 64, 40, 25);
  const size_t stride = 2 * 64;
  const auto q = random_vector(5 * stride, 26);
  const auto own = run(k, v, q, s, 30, 5, false, 1);
  for (int32_t r = 0; r < 5; ++r) {
    const auto* vr = reinterpret_cast<const float*>(v.view().head(30 + r, 1));
    for (int d = 0; d < 64; ++d) EXPECT_FLOAT_EQ(own[r * stride + d], vr[d]) << r;
  }
  EXPECT_EQ(run(k, v, q, s, 30, 5, false, 35), run(k, v, q, s, 30, 5, false, 0));
  EXPECT_NE(run(k, v, q, s, 30, 5, false, 34), run(k, v, q, s, 30, 5, false, 0));
  const auto plain = run(k, v, q, s, 30, 5, false);
  const auto loose = run(k, v, q, s, 30, 5, false, 0, 1e4f);
  const auto tight = run(k, v, q, s, 30, 5, false, 0, 0.01f);
  double loose_diff = 0, tight_diff = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    loose_diff = std::max(loose_diff, std::fabs(double{plain[i]} - loose[i]));
    tight_diff = std::max(tight_diff, std::fabs(double{plain[i]} - tight[i]));
  }
  EXPECT_LT(loose_diff, 1e-5);
  EXPECT_GT(tight_diff, 1e-2);
}

TEST(Attention, OneKeyReturnsItsValue) {
  const Shape s{64, 1, 16};
  PagedKv k(KvDtype::kF32, 16, 2, 64, 1, 4), v(KvDtype::kF32, 16, 2, 64, 1, 5);
  const auto out = run(k, v, random_vector(64, 6), s, 0, 1, false);
  const auto* v0 = reinterpret_cast<const float*>(v.view().head(0, 1));
  for (int d = 0; d < 64; ++d) EXPECT_FLOAT_EQ(out[d], v0[d]);
}

TEST(Attention, RowResultDoesNotDependOnTheTileItIsIn) {
  // Computing rows 121..137 together (past two spans of every head size here) must give each row exactly what
  // computing it alone gives, with two queries sharing loads or not.
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : kShapes) {
      PagedKv k(type, s.block_size, 2, s.head_dim, 140, 7), v(type, s.block_size, 2, s.head_dim, 140, 8);
      const int32_t first = 121, n_rows = 17;
      const size_t stride = static_cast<size_t>(s.group) * s.head_dim;
      const auto q = random_vector(n_rows * stride, 9);
      for (auto [window, softcap] : {std::pair{0, 0.0f}, {7, 1.5f}, {70, 0.0f}}) {
        const auto together = run(k, v, q, s, first, n_rows, false, window, softcap);
        for (int32_t r = 0; r < n_rows; ++r) {
          const std::vector<float> q_row(q.begin() + r * stride, q.begin() + (r + 1) * stride);
          const auto alone = run(k, v, q_row, s, first + r, 1, false, window, softcap);
          for (size_t i = 0; i < stride; ++i) {
            ASSERT_EQ(together[r * stride + i], alone[i])
                << kv_dtype_name(type) << " row " << r << " window " << window;
          }
        }
      }
    }
  }
}

TEST(Attention, VectorAndScalarPathsAgreeBitForBit) {
  // Same lane order, one rounding per fma in both, exact dequantization: the ISA level changes no bit, whether
  // the rows fill a span (143..149 past two spans) or not, and with a window and a softcap too.
  if (active_isa_level() == IsaLevel::kScalar) GTEST_SKIP() << "this CPU has no vector path to compare";
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : kShapes) {
      PagedKv k(type, s.block_size, 2, s.head_dim, 150, 10), v(type, s.block_size, 2, s.head_dim, 150, 11);
      for (auto [first, n_rows, window, softcap] :
           {std::tuple{43, 7, 0, 0.0f}, {143, 7, 0, 0.0f}, {100, 50, 30, 2.0f}, {149, 1, 0, 0.0f}}) {
        const auto q = random_vector(static_cast<size_t>(n_rows) * s.group * s.head_dim, 12 + first);
        const auto fast = run(k, v, q, s, first, n_rows, false, window, softcap);
        const IsaLevel level = active_isa_level();
        set_isa_level(IsaLevel::kScalar);
        const auto scalar = run(k, v, q, s, first, n_rows, false, window, softcap);
        set_isa_level(level);
        EXPECT_EQ(fast, scalar) << kv_dtype_name(type) << " head_dim " << s.head_dim << " first " << first;
      }
    }
  }
}

TEST(Attention, F16InPlaceAndDequantizedReadsGiveTheSameBits) {
  // The AVX2 path reads f16 K/V either converted at every load or converted once per span (F16KvReads; which one
  // kAuto takes depends on the CPU and the tile): every tile, one row or many, with a window and a softcap or not,
  // gets the same bits either way, and the bits of the scalar path.
  if (!isa_supported(IsaLevel::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2 path";
  const IsaLevel level = active_isa_level();
  for (Shape s : kShapes) {
    if (s.head_dim % 8 != 0) continue;  // f16 is read in place only at head sizes that are multiples of 8
    PagedKv k(KvDtype::kF16, s.block_size, 2, s.head_dim, 150, 31),
        v(KvDtype::kF16, s.block_size, 2, s.head_dim, 150, 32);
    for (auto [first, n_rows, window, softcap] :
         {std::tuple{149, 1, 0, 0.0f}, {143, 7, 0, 0.0f}, {120, 30, 0, 0.0f}, {100, 50, 30, 2.0f}}) {
      const auto q = random_vector(static_cast<size_t>(n_rows) * s.group * s.head_dim, 33 + first);
      set_isa_level(IsaLevel::kScalar);
      const auto scalar = run(k, v, q, s, first, n_rows, false, window, softcap);
      set_isa_level(IsaLevel::kAvx2);
      for (F16KvReads reads : {F16KvReads::kInPlace, F16KvReads::kDequantized, F16KvReads::kAuto}) {
        set_f16_kv_reads(reads);
        EXPECT_EQ(run(k, v, q, s, first, n_rows, false, window, softcap), scalar)
            << "head_dim " << s.head_dim << " group " << s.group << " rows " << n_rows << " reads "
            << static_cast<int>(reads);
      }
      set_f16_kv_reads(F16KvReads::kAuto);
      set_isa_level(level);
    }
  }
}

TEST(Attention, WidePathGivesEachQueryItsPerQueryBits) {
  // At the AVX-512 level a tile with 10 or more queries per KV head takes the spans all of them read whole on
  // 16-query vectors: every query must still get, at every level, the bits the scalar path gives it, and the bits
  // it gets alone in a one-row tile (the per-query path). Shapes cover one and several 16-query groups (17 and
  // 160 queries), odd numbers of groups (40 and 68 queries: 3 and 5), so both the paired groups and the lone one
  // go through, GQA, two KV heads in one tile, every KV dtype, a window that cuts no key and one that does.
  if (!isa_supported(IsaLevel::kAvx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 level";
  const IsaLevel level = active_isa_level();
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : {Shape{64, 1, 16}, Shape{64, 4, 16}, Shape{128, 2, 32}, Shape{16, 8, 4}}) {
      constexpr int32_t kHeads = 2;
      PagedKv k(type, s.block_size, kHeads, s.head_dim, 200, 21), v(type, s.block_size, kHeads, s.head_dim, 200, 22);
      // q_gain 40 spreads the scores over hundreds, so the softmax's arguments also fall below kExpMin (exp 0) and
      // near it, where the wide path's exp takes its shortcut.
      for (auto [first, n_rows, window, q_gain] : {std::tuple{150, 17, 0, 1.0f},
                                                   {140, 40, 0, 1.0f},
                                                   {150, 17, 1000, 1.0f},
                                                   {150, 17, 100, 1.0f},
                                                   {140, 40, 0, 40.0f}}) {
        const size_t stride = static_cast<size_t>(kHeads) * s.group * s.head_dim;
        auto q = random_vector(n_rows * stride, 23 + n_rows);
        for (float& x : q) x *= q_gain;
        auto tile = [&](const float* qp, float* out, int32_t pos, int32_t rows) {
          const AttentionTile t{qp, stride, out, stride, rows, pos, s.group, 0, s.head_dim, 0.2f, window, 0.0f, kHeads};
          std::vector<float> scratch(attention_scratch_floats(s.head_dim, rows, s.group * kHeads));
          attention_tile(t, k.view(), v.view(), scratch.data());
        };
        std::vector<float> scalar(n_rows * stride, NAN);
        set_isa_level(IsaLevel::kScalar);
        tile(q.data(), scalar.data(), first, n_rows);
        for (IsaLevel l : {IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni}) {
          if (!isa_supported(l)) continue;
          set_isa_level(l);
          std::vector<float> together(n_rows * stride, NAN), alone(n_rows * stride, NAN);
          tile(q.data(), together.data(), first, n_rows);
          for (int32_t r = 0; r < n_rows; ++r) tile(q.data() + r * stride, alone.data() + r * stride, first + r, 1);
          ASSERT_EQ(together, scalar) << kv_dtype_name(type) << " head_dim " << s.head_dim << " group " << s.group
                                      << " rows " << n_rows << " window " << window << " level " << isa_level_name(l);
          ASSERT_EQ(alone, scalar) << kv_dtype_name(type) << " head_dim " << s.head_dim << " level "
                                   << isa_level_name(l);
        }
        set_isa_level(level);
      }
    }
  }
}

TEST(Attention, ResultDoesNotDependOnTheKvBlockSize) {
  // Spans are absolute key ranges of attention_span(head_dim) keys, whatever the pool's block size: the same keys
  // stored in blocks of 1, 16 or 48 give the same bits.
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : kShapes) {
      std::vector<float> first;
      for (int32_t bs : {1, 16, 48}) {
        PagedKv k(type, bs, 2, s.head_dim, 131, 13), v(type, bs, 2, s.head_dim, 131, 14);  // 131 blocks of 1: 5 ⟂ 131
        const auto q = random_vector(static_cast<size_t>(10) * s.group * s.head_dim, 15);
        const auto out = run(k, v, q, {s.head_dim, s.group, bs}, 120, 10, false);
        if (first.empty()) {
          first = out;
        } else {
          EXPECT_EQ(out, first) << kv_dtype_name(type) << " head_dim " << s.head_dim << " block size " << bs;
        }
      }
    }
  }
}

TEST(Attention, SeveralKvHeadsInOneTileGiveEachHeadsOwnBits) {
  // A decode item covers neighbouring KV heads: each head's queries must get exactly what a tile of that head
  // alone gives them, and the reference twin must agree within its tolerance.
  for (KvDtype type : all_kv_dtypes()) {
    for (Shape s : kShapes) {
      constexpr int32_t kHeads = 3;
      PagedKv k(type, s.block_size, kHeads, s.head_dim, 150, 16), v(type, s.block_size, kHeads, s.head_dim, 150, 17);
      const int32_t n_rows = 3, first = 140;
      const size_t stride = static_cast<size_t>(kHeads) * s.group * s.head_dim;
      const auto q = random_vector(n_rows * stride, 18);
      std::vector<float> together(n_rows * stride, NAN), alone(n_rows * stride, NAN), ref(n_rows * stride, NAN);
      AttentionTile t{q.data(), stride, together.data(), stride, n_rows, first, s.group, 0, s.head_dim, 0.2f,
                      0,        0.0f,   kHeads};
      std::vector<float> scratch(attention_scratch_floats(s.head_dim, n_rows, s.group * kHeads));
      attention_tile(t, k.view(), v.view(), scratch.data());
      t.out = ref.data();
      attention_tile_reference(t, k.view(), v.view());
      for (int32_t h = 0; h < kHeads; ++h) {
        const size_t offset = static_cast<size_t>(h) * s.group * s.head_dim;
        AttentionTile one = t;
        one.q = q.data() + offset;
        one.out = alone.data() + offset;
        one.kv_head = h;
        one.n_kv_heads = 1;
        attention_tile(one, k.view(), v.view(), scratch.data());
      }
      ASSERT_EQ(together, alone) << kv_dtype_name(type) << " head_dim " << s.head_dim;
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(together[i], ref[i], 2e-5f) << kv_dtype_name(type) << " head_dim " << s.head_dim << " i " << i;
      }
    }
  }
}

TEST(Attention, SpanKeepsItsKeysInL1) {
  EXPECT_EQ(attention_span(64), 64);
  EXPECT_EQ(attention_span(128), 32);
  EXPECT_EQ(attention_span(256), 16);
  EXPECT_EQ(attention_span(80), 48);
  EXPECT_EQ(attention_span(8), 64);
  for (int32_t hd = 1; hd <= 512; ++hd) {
    const int32_t span = attention_span(hd);
    EXPECT_EQ(span % 8, 0) << hd;
    EXPECT_GE(span, 16) << hd;
    EXPECT_LE(span, 64) << hd;
  }
}

// The softmax's own exp: within 2 ulp of std::exp over the arguments a softmax produces ([-87, 0], dense near 0),
// the same bits with and without AVX2, exactly 1 at 0, 0 far below, and NaN kept.
TEST(Attention, SoftmaxExpIsWithinTwoUlp) {
  std::vector<float> x;
  for (float v = 0.0f; v > -87.0f; v = v * 1.001f - 1e-4f) x.push_back(v);
  for (int i = 0; i < 20000; ++i) x.push_back(-87.0f * static_cast<float>(i) / 20000.0f);
  x.push_back(-200.0f);
  x.push_back(-INFINITY);
  x.push_back(NAN);
  std::vector<float> fast(x.size());
  std::vector<float> scalar(x.size());
  attention_exp(x.data(), fast.data(), static_cast<int64_t>(x.size()));
  const IsaLevel level = active_isa_level();
  set_isa_level(IsaLevel::kScalar);
  attention_exp(x.data(), scalar.data(), static_cast<int64_t>(x.size()));
  set_isa_level(level);
  EXPECT_EQ(std::memcmp(fast.data(), scalar.data(), x.size() * sizeof(float)), 0);
  for (size_t i = 0; i + 3 < x.size(); ++i) {
    const float want = std::exp(x[i]);
    const float ulp = std::nextafter(want, INFINITY) - want;
    ASSERT_LE(std::fabs(scalar[i] - want), 2 * ulp) << "exp(" << x[i] << ")";
  }
  EXPECT_EQ(scalar[0], 1.0f);
  EXPECT_EQ(scalar[x.size() - 3], 0.0f);
  EXPECT_EQ(scalar[x.size() - 2], 0.0f);
  EXPECT_TRUE(std::isnan(scalar[x.size() - 1]));
}

TEST(Attention, QuantizedKvStaysCloseToF32Kv) {
  // Output error of attention when K and V are stored in a smaller dtype, relative to f32 storage. Values are
  // N(0, 1), so outputs are averages of O(1) numbers.
  const struct {
    KvDtype type;
    float max_abs_error;
  } bounds[] = {{KvDtype::kF16, 2e-3f}, {KvDtype::kBF16, 2e-2f}, {KvDtype::kQ8_0, 4e-2f}, {KvDtype::kQ4_0, 0.35f}};
  const Shape s{64, 2, 16};
  PagedKv k32(KvDtype::kF32, 16, 2, 64, 200, 13), v32(KvDtype::kF32, 16, 2, 64, 200, 14);
  const auto q = random_vector(static_cast<size_t>(4) * s.group * s.head_dim, 15);
  const auto exact = run(k32, v32, q, s, 196, 4, false);
  for (auto [type, bound] : bounds) {
    PagedKv k(type, 16, 2, 64, 200, 13), v(type, 16, 2, 64, 200, 14);
    const auto approx = run(k, v, q, s, 196, 4, false);
    float worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::fabs(exact[i] - approx[i]));
    EXPECT_LT(worst, bound) << kv_dtype_name(type);
    EXPECT_GT(worst, 0.0f) << kv_dtype_name(type) << " changed nothing: is it really stored smaller?";
  }
}

// Every special value (zeros, subnormal halves and their rounding edges, the overflow edge, infinities, NaNs with
// payloads) and a million random bit patterns: the F16C store writes exactly the scalar converter's bytes.
TEST(KvStore, F16VectorPathIsBytewiseTheScalarOne) {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x33000000u, 0x33000001u, 0x337FFFFFu, 0x38800000u,
                                0x387FFFFFu, 0x477FEFFFu, 0x477FF000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                0x7F800001u, 0xFFA00000u, 0x7FFFFFFFu, 0x3F800000u, 0x00000001u, 0x33800000u};
  std::mt19937 rng(99);
  for (int i = 0; i < 1000000; ++i) bits.push_back(rng());
  for (uint32_t e = 0; e < 256; ++e) {  // every exponent, with round-half edges of the kept mantissa bits
    for (uint32_t m : {0x0u, 0x1000u, 0x1001u, 0x3000u, 0x0FFFu, 0x7FFFFFu}) bits.push_back((e << 23) | m);
  }
  while (bits.size() % 8 != 0) bits.push_back(0);
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  std::vector<uint8_t> fast(x.size() * 2);
  std::vector<uint8_t> scalar(x.size() * 2);
  for (size_t i = 0; i < x.size(); i += 8) {
    kv_store_head(KvDtype::kF16, x.data() + i, fast.data() + 2 * i, 8);
    kv_quantize_head(KvDtype::kF16, x.data() + i, scalar.data() + 2 * i, 8);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::memcmp(&fast[2 * i], &scalar[2 * i], 2), 0) << std::hex << "bits 0x" << bits[i];
  }
}

TEST(KvDequantize, VectorPathEqualsReferenceBitForBit) {
  for (KvDtype type : all_kv_dtypes()) {
    for (int32_t hd : {8, 16, 40, 64, 72, 80, 128, 256}) {
      const auto x = random_vector(hd, 16 + hd, 3.0f);
      std::vector<uint8_t> q(kv_head_bytes(type, hd));
      kv_quantize_head(type, x.data(), q.data(), hd);
      std::vector<float> fast(hd), ref(hd);
      kv_dequantize_head(type, q.data(), fast.data(), hd);
      kv_dequantize_head_reference(type, q.data(), ref.data(), hd);
      EXPECT_EQ(fast, ref) << kv_dtype_name(type) << " head_dim " << hd;
    }
  }
}

}  // namespace
}  // namespace hearth

// AVX2 tiles for Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights times Q8_0 activations, each block's term added in the
// twin's order (Reduction::kAsTwin in weight_types.h).
//
// Unlike the Q8_0/Q4_0 tiles (vec_dot_avx2_q8_0_act_lanes.cpp, fp32 lanes), these give bitwise the results of their
// scalar twins (vec_dot_ref.cpp): every block's products are summed exactly in int32, and the block's term, written
// above each reference function, is added to one scalar fp32 accumulator per output, block after block. To keep
// that sequential sum cheap, a tile works on groups of 8 blocks: the 8 blocks' int32 sums are reduced (exactly)
// into the 8 lanes of one vector, their 8 terms are formed with 8-wide fp32 multiplies (the same fp32 operations
// as the scalar expression, lane by lane), and then added to the accumulator in block order. A row's last
// n_blocks % 8 blocks take the same arithmetic one block at a time.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <cstring>

#include "kernels/avx2_common.h"
#include "tensor/quant.h"

namespace hearth::kernels {
namespace {

using avx2::hsum_i32;
using avx2::load_fp16;
using avx2::TileTable;

constexpr int kGroupBlocks = 8;  // blocks per group: one int32 / fp32 lane each

// Elements 0-15 of a block from the low nibbles of `packed`, elements 16-31 from the high nibbles.
HEARTH_AVX2 inline __m256i nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low_mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low_mask), _mm_and_si128(packed, low_mask));
}

// Byte e is 0x10 where bit e of the little-endian 32-bit qh is set, else 0: the fifth bit of Q5_0/Q5_1 codes.
HEARTH_AVX2 inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i set =
      _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE)), _mm256_set1_epi64x(-1));
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The fp16 field `field` of 8 consecutive blocks as 8 fp32 lanes (exact, as fp16_to_fp32).
template <class Block>
HEARTH_AVX2 inline __m256 fp16_x8(const Block* blocks, const uint16_t Block::*field) {
  alignas(16) uint16_t halves[kGroupBlocks];
  for (int k = 0; k < kGroupBlocks; ++k) halves[k] = blocks[k].*field;
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(halves)));
}

// The scale d of a block whose d is an fp16: one block's, and 8 consecutive blocks' as 8 fp32 lanes.
template <class Block>
struct Fp16Scale {
  HEARTH_AVX2 static float scale(const Block& w) { return load_fp16(&w.d); }
  HEARTH_AVX2 static __m256 scales_x8(const Block* blocks) { return fp16_x8(blocks, &Block::d); }
};

// Each Decode gives the 32 codes of a block as bytes, and its scale d (scale, scales_x8). kSigned: the codes are the
// signed values themselves; otherwise they are unsigned and value = code − kOffset. kHasMin: the block adds
// (m·dx)·Σ qx.
struct DecodeQ4_1 : Fp16Scale<BlockQ4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  HEARTH_AVX2 static __m256i codes(const Block& w) { return nibbles(w.qs); }
};

struct DecodeQ5_0 : Fp16Scale<BlockQ5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false;
  HEARTH_AVX2 static __m256i codes(const Block& w) { return _mm256_or_si256(nibbles(w.qs), fifth_bits(w.qh)); }
};

struct DecodeQ5_1 : Fp16Scale<BlockQ5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  HEARTH_AVX2 static __m256i codes(const Block& w) { return _mm256_or_si256(nibbles(w.qs), fifth_bits(w.qh)); }
};

struct DecodeIQ4_NL : Fp16Scale<BlockIQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr bool kSigned = true;  // kIq4NlValues, in [-127, 113]
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  HEARTH_AVX2 static __m256i codes(const Block& w) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    return _mm256_shuffle_epi8(table, nibbles(w.qs));
  }
};

// MXFP4: IQ4_NL's layout with GGML's doubled E2M1 table, and for d half the E8M0 scale, the twin's own fp32 value
// (mxfp4_scale_half) lane by lane.
struct DecodeMXFP4 {
  using Block = BlockMXFP4;
  static constexpr bool kSigned = true;  // kMxfp4Values, in [-12, 12]
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  HEARTH_AVX2 static __m256i codes(const Block& w) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
    return _mm256_shuffle_epi8(table, nibbles(w.qs));
  }
  HEARTH_AVX2 static float scale(const Block& w) { return mxfp4_scale_half(w.e); }
  HEARTH_AVX2 static __m256 scales_x8(const Block* blocks) {
    alignas(32) float d[kGroupBlocks];
    for (int k = 0; k < kGroupBlocks; ++k) d[k] = mxfp4_scale_half(blocks[k].e);
    return _mm256_load_ps(d);
  }
};

// Σ code·qx of one block as 8 int32 lanes. Unsigned codes (at most 31) go straight into maddubs; signed ones as
// |v| and qx·sign(v). The 16-bit pair sums stay below 2·127·127 < 2^15, so every sum is exact.
template <bool kSigned>
HEARTH_AVX2 inline __m256i block_lanes(__m256i codes, const int8_t* x_qs) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_qs));
  const __m256i products = kSigned ? _mm256_maddubs_epi16(_mm256_sign_epi8(codes, codes), _mm256_sign_epi8(xq, codes))
                                   : _mm256_maddubs_epi16(codes, xq);
  return _mm256_madd_epi16(products, _mm256_set1_epi16(1));
}

// Σ qx of one block as 8 int32 lanes.
HEARTH_AVX2 inline __m256i block_x_lanes(const int8_t* x_qs) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_qs));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), _mm256_set1_epi16(1));
}

// Given q0123 = hadd(hadd(v0, v1), hadd(v2, v3)) and q4567 alike, lane k of the result is the sum of the 8 lanes
// of v_k (integer, exact in any order).
HEARTH_AVX2 inline __m256i combine_quads(__m256i q0123, __m256i q4567) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0123, q4567, 0x20), _mm256_permute2x128_si256(q0123, q4567, 0x31));
}

// acc += lane 0, then lane 1, ... lane 7: the scalar twin's block order.
HEARTH_AVX2 inline void add_lanes_in_order(__m256 terms, float& acc) {
  alignas(32) float lane[kGroupBlocks];
  _mm256_store_ps(lane, terms);
  for (int k = 0; k < kGroupBlocks; ++k) acc += lane[k];
}

template <class Decode>
struct Q8MoreKernel {
  using Block = typename Decode::Block;
  static constexpr bool kNeedsXSum = Decode::kOffset != 0 || Decode::kHasMin;

  // Per-token data of one group of 8 blocks, shared by every row of the tile.
  template <int T>
  struct TokenGroup {
    __m256 xd[T];       // activation scales
    __m256i x_sum[T];   // Σ qx per block (when kNeedsXSum)
    __m256 x_sum_f[T];  // the same as fp32 (kHasMin)
  };

  template <int T>
  HEARTH_AVX2 static void load_token_group(const BlockQ8_0* const (&x)[T], int64_t b0, TokenGroup<T>& g) {
    for (int t = 0; t < T; ++t) {
      g.xd[t] = fp16_x8(x[t] + b0, &BlockQ8_0::d);
      if constexpr (kNeedsXSum) {
        __m256i quad[2];
        for (int q = 0; q < 2; ++q) {
          const BlockQ8_0* xb = x[t] + b0 + 4 * q;
          quad[q] = _mm256_hadd_epi32(_mm256_hadd_epi32(block_x_lanes(xb[0].qs), block_x_lanes(xb[1].qs)),
                                      _mm256_hadd_epi32(block_x_lanes(xb[2].qs), block_x_lanes(xb[3].qs)));
        }
        g.x_sum[t] = combine_quads(quad[0], quad[1]);
        if constexpr (Decode::kHasMin) g.x_sum_f[t] = _mm256_cvtepi32_ps(g.x_sum[t]);
      }
    }
  }

  // Lane k of sumi[t] = Σ code·qx of block b0 + k against token t.
  template <int T>
  HEARTH_AVX2 static void group_sums(const Block* w, const BlockQ8_0* const (&x)[T], int64_t b0, __m256i (&sumi)[T]) {
    __m256i quad[T][2];
    for (int q = 0; q < 2; ++q) {
      __m256i pair[T][2];
      for (int p = 0; p < 2; ++p) {
        const int k = 4 * q + 2 * p;
        const __m256i c0 = Decode::codes(w[b0 + k]);
        const __m256i c1 = Decode::codes(w[b0 + k + 1]);
        for (int t = 0; t < T; ++t) {
          pair[t][p] = _mm256_hadd_epi32(block_lanes<Decode::kSigned>(c0, x[t][b0 + k].qs),
                                         block_lanes<Decode::kSigned>(c1, x[t][b0 + k + 1].qs));
        }
      }
      for (int t = 0; t < T; ++t) quad[t][q] = _mm256_hadd_epi32(pair[t][0], pair[t][1]);
    }
    for (int t = 0; t < T; ++t) sumi[t] = combine_quads(quad[t][0], quad[t][1]);
  }

  // One block b, one row and one token: the scalar twin's expression with the integer sums from vector lanes.
  HEARTH_AVX2 static float block_term(const Block& w, const BlockQ8_0& x) {
    int sumi = hsum_i32(block_lanes<Decode::kSigned>(Decode::codes(w), x.qs));
    int sum_x = 0;
    if constexpr (kNeedsXSum) sum_x = hsum_i32(block_x_lanes(x.qs));
    if constexpr (Decode::kOffset != 0) sumi -= Decode::kOffset * sum_x;
    const float dx = load_fp16(&x.d);
    float term = (Decode::scale(w) * dx) * static_cast<float>(sumi);
    if constexpr (Decode::kHasMin) term = term + (load_fp16(&w.m) * dx) * static_cast<float>(sum_x);
    return term;
  }

  template <int R, int T>
  HEARTH_AVX2 static void run(const TileArgs& a) {
    const BlockQ8_0* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(a.x + t * a.x_stride);
    const Block* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(a.w + r * a.w_stride);
    float acc[R][T] = {};
    const int64_t n_blocks = a.n_cols / kQK8_0;
    const int64_t n_grouped = n_blocks - n_blocks % kGroupBlocks;
    for (int64_t b0 = 0; b0 < n_grouped; b0 += kGroupBlocks) {
      TokenGroup<T> g;
      load_token_group<T>(x, b0, g);
      for (int r = 0; r < R; ++r) {
        __m256i sumi[T];
        group_sums<T>(w[r], x, b0, sumi);
        const __m256 wd = Decode::scales_x8(w[r] + b0);
        __m256 wm = _mm256_setzero_ps();
        if constexpr (Decode::kHasMin) wm = fp16_x8(w[r] + b0, &Block::m);
        for (int t = 0; t < T; ++t) {
          __m256i s = sumi[t];
          if constexpr (Decode::kOffset != 0) {
            s = _mm256_sub_epi32(s, _mm256_mullo_epi32(g.x_sum[t], _mm256_set1_epi32(Decode::kOffset)));
          }
          __m256 terms = _mm256_mul_ps(_mm256_mul_ps(wd, g.xd[t]), _mm256_cvtepi32_ps(s));
          if constexpr (Decode::kHasMin) {
            terms = _mm256_add_ps(terms, _mm256_mul_ps(_mm256_mul_ps(wm, g.xd[t]), g.x_sum_f[t]));
          }
          add_lanes_in_order(terms, acc[r][t]);
        }
      }
    }
    for (int64_t b = n_grouped; b < n_blocks; ++b) {
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) acc[r][t] += block_term(w[r][b], x[t][b]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) a.y[t * a.y_stride + r] = acc[r][t];
    }
  }
};

constexpr int kRows = 4;
constexpr int kTokens = 2;

}  // namespace

constinit const TileKernel kTileAvx2Q4_1 = TileTable<Q8MoreKernel<DecodeQ4_1>, kRows, kTokens>::kernel();
constinit const TileKernel kTileAvx2Q5_0 = TileTable<Q8MoreKernel<DecodeQ5_0>, kRows, kTokens>::kernel();
constinit const TileKernel kTileAvx2Q5_1 = TileTable<Q8MoreKernel<DecodeQ5_1>, kRows, kTokens>::kernel();
constinit const TileKernel kTileAvx2IQ4_NL = TileTable<Q8MoreKernel<DecodeIQ4_NL>, kRows, kTokens>::kernel();
constinit const TileKernel kTileAvx2MXFP4 = TileTable<Q8MoreKernel<DecodeMXFP4>, kRows, kTokens>::kernel();

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTileAvx2Q4_1{};
constinit const TileKernel kTileAvx2Q5_0{};
constinit const TileKernel kTileAvx2Q5_1{};
constinit const TileKernel kTileAvx2IQ4_NL{};
constinit const TileKernel kTileAvx2MXFP4{};
}  // namespace hearth::kernels

#endif

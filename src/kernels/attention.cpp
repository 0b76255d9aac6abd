#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/attention_rows.h"
#include "kernels/attention_wide.h"
#include "kernels/cpu_isa.h"
#include "kernels/dot_lanes.h"
#include "kernels/kv_convert.h"
#include "kernels/ops.h"
#include "util/result.h"

namespace hearth {
namespace {

using kernels::fetch_span_to_l2;
using kernels::first_key_of;
using kernels::head_rows;
using kernels::kMaxSpan;
using kernels::load_tile;

#define HEARTH_AVX2_ATTN __attribute__((target("avx2,fma,f16c")))

// Scratch layout of attention_tile, in floats.
struct ScratchLayout {
  size_t k_tile, v_tile, p, m, l, acc, wide, total;
  ScratchLayout(int32_t span, int32_t head_dim, int32_t n_queries) {
    const size_t tile = static_cast<size_t>(span) * head_dim;
    k_tile = 0;
    v_tile = k_tile + tile;
    p = v_tile + tile;
    m = p + 2 * static_cast<size_t>(span);  // two queries' probabilities
    l = m + n_queries;
    acc = l + n_queries;
    wide = acc + static_cast<size_t>(n_queries) * head_dim;
    total = wide + kernels::wide_scratch_floats(span, head_dim, n_queries);
  }
};

// exp(x) for the softmax (constants in attention_wide.h), written once as scalar and once as AVX2 code with the
// same operations in the same order (every fma explicit, the library builds with -ffp-contract=off), so every ISA
// level gives the same bits. Within 2 ulp of std::exp on [-87, 0] (Attention.SoftmaxExpIsWithinTwoUlp); 0 below
// kExpMin (2^-126), +inf above kExpMax.
using kernels::kExpMax;
using kernels::kExpMin;
using kernels::kExpPoly;
using kernels::kLn2Hi;
using kernels::kLn2Lo;
using kernels::kLog2e;

float exp_scalar(float x) {
  if (std::isnan(x)) return x;
  if (x < kExpMin) return 0.0f;
  if (x > kExpMax) return INFINITY;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float poly = kExpPoly[0];
  for (int i = 1; i < 6; ++i) poly = std::fma(poly, r, kExpPoly[i]);
  const float y = std::fma(poly, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// One tile's step of the online softmax for one query: p[0, n) holds the scores on entry and exp(s_j - m_new) on
// exit; m is updated to m_new = max(m, max_j s_j); returns corr = exp(m_old - m_new) and adds the new terms to l
// (l = l·corr + Σ_j p_j, the sum in dot_lanes' lane order: lane j mod 8 over the first n - n % 8, the lanes
// combined, then the rest in order).
float softmax_step_scalar(float* p, int32_t n, float& m, float& l) {
  float tile_max = -INFINITY;
  for (int32_t j = 0; j < n; ++j) tile_max = std::max(tile_max, p[j]);
  const float m_new = std::max(m, tile_max);
  const float corr = exp_scalar(m - m_new);
  float lanes[8] = {};
  const int32_t n8 = n - n % 8;
  for (int32_t j = 0; j < n8; j += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += (p[j + k] = exp_scalar(p[j + k] - m_new));
  }
  float sum = kernels::combine_lanes(lanes);
  for (int32_t j = n8; j < n; ++j) sum += (p[j] = exp_scalar(p[j] - m_new));
  l = l * corr + sum;
  m = m_new;
  return corr;
}

// The two per-tile steps of the online softmax, scalar:
//   scores: s_j = (q · k_j) × scale                              for j < n
//   accumulate: acc = acc × corr, then acc += p_j × v_j           for j in order, one rounding per step (fma)
struct ScalarOps {
  static void scores(const float* q, const float* const* k, int32_t n, int32_t hd, float scale, float* s) {
    for (int32_t j = 0; j < n; ++j) s[j] = kernels::dot_lanes_scalar(q, k[j], hd) * scale;
  }
  static void accumulate(float* acc, float corr, const float* p, const float* const* v, int32_t n, int32_t hd) {
    for (int32_t d = 0; d < hd; ++d) {
      float a = acc[d] * corr;
      for (int32_t j = 0; j < n; ++j) a = std::fma(v[j][d], p[j], a);
      acc[d] = a;
    }
  }
  // Two queries over the same keys: each one's arithmetic exactly as alone.
  static void scores2(const float* q0, const float* q1, const float* const* k, int32_t n, int32_t hd, float scale,
                      float* s0, float* s1) {
    scores(q0, k, n, hd, scale, s0);
    scores(q1, k, n, hd, scale, s1);
  }
  static void accumulate2(float* acc0, float corr0, const float* p0, float* acc1, float corr1, const float* p1,
                          const float* const* v, int32_t n, int32_t hd) {
    accumulate(acc0, corr0, p0, v, n, hd);
    accumulate(acc1, corr1, p1, v, n, hd);
  }
  static float softmax_step(float* p, int32_t n, float& m, float& l) { return softmax_step_scalar(p, n, m, l); }
  static constexpr bool kFusedF16 = false;
};

// 8 consecutive elements of a key or value row as fp32: a float row as is, an f16 row (bytes) converted exactly
// as kv_dequantize_head converts it (F16C).
HEARTH_AVX2_ATTN inline __m256 load8(const float* row, int32_t i) {
  return _mm256_loadu_ps(row + i);
}
HEARTH_AVX2_ATTN inline __m256 load8(const uint8_t* row, int32_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
}

// Same arithmetic per element as ScalarOps::accumulate; up to 64 dimensions stay in registers across the tile.
// Rows of f16 (uint8_t) require hd % 8 == 0.
template <class Row>
HEARTH_AVX2_ATTN void accumulate_rows(float* acc, float corr, const float* p, const Row* const* v, int32_t n,
                                      int32_t hd) {
  const __m256 vc = _mm256_set1_ps(corr);
  int32_t d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) {
    __m256 a[8];
    for (int c = 0; c < 8; ++c) a[c] = _mm256_mul_ps(_mm256_loadu_ps(acc + d0 + 8 * c), vc);
    for (int32_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      for (int c = 0; c < 8; ++c) a[c] = _mm256_fmadd_ps(load8(v[j], d0 + 8 * c), pj, a[c]);
    }
    for (int c = 0; c < 8; ++c) _mm256_storeu_ps(acc + d0 + 8 * c, a[c]);
  }
  for (; d0 + 8 <= hd; d0 += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + d0), vc);
    for (int32_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(load8(v[j], d0), _mm256_set1_ps(p[j]), a);
    _mm256_storeu_ps(acc + d0, a);
  }
  if constexpr (std::is_same_v<Row, float>) {
    for (int32_t d = d0; d < hd; ++d) {
      float a = acc[d] * corr;
      for (int32_t j = 0; j < n; ++j) a = std::fma(v[j][d], p[j], a);
      acc[d] = a;
    }
  }
}

// accumulate_rows for two queries over the same value rows, each value loaded once for both; every element's
// arithmetic is accumulate_rows' (acc × corr, then one fma per key in order), so the bits are each query's alone.
template <class Row>
HEARTH_AVX2_ATTN void accumulate_rows2(float* acc0, float corr0, const float* p0, float* acc1, float corr1,
                                       const float* p1, const Row* const* v, int32_t n, int32_t hd) {
  const __m256 c0 = _mm256_set1_ps(corr0);
  const __m256 c1 = _mm256_set1_ps(corr1);
  int32_t d0 = 0;
  for (; d0 + 32 <= hd; d0 += 32) {
    __m256 a[4], b[4];
    for (int c = 0; c < 4; ++c) {
      a[c] = _mm256_mul_ps(_mm256_loadu_ps(acc0 + d0 + 8 * c), c0);
      b[c] = _mm256_mul_ps(_mm256_loadu_ps(acc1 + d0 + 8 * c), c1);
    }
    for (int32_t j = 0; j < n; ++j) {
      const __m256 x = _mm256_set1_ps(p0[j]);
      const __m256 y = _mm256_set1_ps(p1[j]);
      for (int c = 0; c < 4; ++c) {
        const __m256 vv = load8(v[j], d0 + 8 * c);
        a[c] = _mm256_fmadd_ps(vv, x, a[c]);
        b[c] = _mm256_fmadd_ps(vv, y, b[c]);
      }
    }
    for (int c = 0; c < 4; ++c) {
      _mm256_storeu_ps(acc0 + d0 + 8 * c, a[c]);
      _mm256_storeu_ps(acc1 + d0 + 8 * c, b[c]);
    }
  }
  for (; d0 + 8 <= hd; d0 += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc0 + d0), c0);
    __m256 b = _mm256_mul_ps(_mm256_loadu_ps(acc1 + d0), c1);
    for (int32_t j = 0; j < n; ++j) {
      const __m256 vv = load8(v[j], d0);
      a = _mm256_fmadd_ps(vv, _mm256_set1_ps(p0[j]), a);
      b = _mm256_fmadd_ps(vv, _mm256_set1_ps(p1[j]), b);
    }
    _mm256_storeu_ps(acc0 + d0, a);
    _mm256_storeu_ps(acc1 + d0, b);
  }
  if constexpr (std::is_same_v<Row, float>) {
    for (int32_t d = d0; d < hd; ++d) {
      float a = acc0[d] * corr0;
      float b = acc1[d] * corr1;
      for (int32_t j = 0; j < n; ++j) {
        a = std::fma(v[j][d], p0[j], a);
        b = std::fma(v[j][d], p1[j], b);
      }
      acc0[d] = a;
      acc1[d] = b;
    }
  }
}

// exp_scalar on 8 lanes, the same operations.
HEARTH_AVX2_ATTN inline __m256 exp8(__m256 x) {
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 poly = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(kExpPoly[i]));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(poly, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 out = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_LT_OQ));
  out = _mm256_blendv_ps(out, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(kExpMax), _CMP_GT_OQ));
  return _mm256_blendv_ps(out, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN stays the NaN it was
}

HEARTH_AVX2_ATTN void exp8_store(const float* x, float* y) {
  _mm256_storeu_ps(y, exp8(_mm256_loadu_ps(x)));
}

// softmax_step_scalar, 8 scores at a time.
HEARTH_AVX2_ATTN float softmax_step_avx2(float* p, int32_t n, float& m, float& l) {
  const int32_t n8 = n - n % 8;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (int32_t j = 0; j < n8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(p + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float tile_max = -INFINITY;
  for (float v : lanes) tile_max = std::max(tile_max, v);
  for (int32_t j = n8; j < n; ++j) tile_max = std::max(tile_max, p[j]);
  const float m_new = std::max(m, tile_max);
  // exp8's lanes are exp_scalar's bits: the correction and the last n % 8 terms take one vector exp each instead
  // of a scalar one apiece.
  const float corr = _mm256_cvtss_f32(exp8(_mm256_set1_ps(m - m_new)));
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (int32_t j = 0; j < n8; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
    _mm256_storeu_ps(p + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_store_ps(lanes, vsum);
  float sum = kernels::combine_lanes(lanes);
  if (n8 < n) {
    alignas(32) float tail[8] = {};
    for (int32_t j = n8; j < n; ++j) tail[j - n8] = p[j] - m_new;
    _mm256_store_ps(tail, exp8(_mm256_load_ps(tail)));
    for (int32_t j = n8; j < n; ++j) sum += (p[j] = tail[j - n8]);
  }
  l = l * corr + sum;
  m = m_new;
  return corr;
}

// The dot_lanes combination ((0+4)+(2+6)) + ((1+5)+(3+7)) of 8 accumulators at once: out[j] = combine(acc[j]),
// the same additions as combine_lanes, so scores computed 8 keys at a time keep their bits.
HEARTH_AVX2_ATTN inline __m256 combine8(const __m256 (&acc)[8]) {
  __m256 x[4];
  for (int i = 0; i < 4; ++i) {
    // lanes 0..3 of key 2i and of key 2i+1: l + (l + 4)
    const __m256 pair = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x20),
                                      _mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x31));
    // lane 0: (0+4)+(2+6), lane 1: (1+5)+(3+7)
    x[i] = _mm256_add_ps(pair, _mm256_shuffle_ps(pair, pair, _MM_SHUFFLE(1, 0, 3, 2)));
  }
  const __m256 y1 = _mm256_shuffle_ps(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0));  // keys 0, 2 | 1, 3
  const __m256 y2 = _mm256_shuffle_ps(x[2], x[3], _MM_SHUFFLE(1, 0, 1, 0));  // keys 4, 6 | 5, 7
  const __m256 sums = _mm256_hadd_ps(y1, y2);                                // keys 0 2 4 6 | 1 3 5 7
  return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// s_j = (q · k_j) × scale for rows of floats or of f16 (hd % 8 == 0 for f16): 8 keys at a time, each key's
// 8 lanes accumulated over the dimensions in order as dot_lanes does, then combine8; the remaining keys one by one.
template <class Row>
HEARTH_AVX2_ATTN void scores_rows(const float* q, const Row* const* k, int32_t n, int32_t hd, float scale, float* s) {
  const int32_t hd8 = hd - hd % 8;
  int32_t j = 0;
  if (hd8 == hd) {
    for (; j + 8 <= n; j += 8) {
      __m256 acc[8];
      for (int t = 0; t < 8; ++t) acc[t] = _mm256_setzero_ps();
      for (int32_t i = 0; i < hd; i += 8) {
        const __m256 qi = _mm256_loadu_ps(q + i);
        for (int t = 0; t < 8; ++t) acc[t] = _mm256_fmadd_ps(qi, load8(k[j + t], i), acc[t]);
      }
      _mm256_storeu_ps(s + j, _mm256_mul_ps(combine8(acc), _mm256_set1_ps(scale)));
    }
  }
  for (; j < n; ++j) {
    __m256 acc = _mm256_setzero_ps();
    for (int32_t i = 0; i < hd8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k[j], i), acc);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float dot = kernels::combine_lanes(lanes);
    if constexpr (std::is_same_v<Row, float>) {
      for (int32_t i = hd8; i < hd; ++i) dot = std::fma(q[i], k[j][i], dot);
    }
    s[j] = dot * scale;
  }
}

// scores_rows for two queries over the same keys, each key row loaded once for both: 4 keys × 2 queries go through
// combine8 together, which combines each of its 8 accumulators alone, so every score has the bits scores_rows
// gives it; the keys after the last multiple of 4 go through scores_rows.
template <class Row>
HEARTH_AVX2_ATTN void scores_rows2(const float* q0, const float* q1, const Row* const* k, int32_t n, int32_t hd,
                                   float scale, float* s0, float* s1) {
  int32_t j = 0;
  if (hd % 8 == 0) {
    for (; j + 4 <= n; j += 4) {
      __m256 acc[8];
      for (__m256& a : acc) a = _mm256_setzero_ps();
      for (int32_t i = 0; i < hd; i += 8) {
        const __m256 x = _mm256_loadu_ps(q0 + i);
        const __m256 y = _mm256_loadu_ps(q1 + i);
        for (int t = 0; t < 4; ++t) {
          const __m256 kt = load8(k[j + t], i);
          acc[t] = _mm256_fmadd_ps(x, kt, acc[t]);
          acc[4 + t] = _mm256_fmadd_ps(y, kt, acc[4 + t]);
        }
      }
      const __m256 sums = _mm256_mul_ps(combine8(acc), _mm256_set1_ps(scale));
      _mm_storeu_ps(s0 + j, _mm256_castps256_ps128(sums));
      _mm_storeu_ps(s1 + j, _mm256_extractf128_ps(sums, 1));
    }
  }
  scores_rows(q0, k + j, n - j, hd, scale, s0 + j);
  scores_rows(q1, k + j, n - j, hd, scale, s1 + j);
}

// Rows are floats, or f16 read in place (Row = uint8_t, head size a multiple of 8).
struct Avx2Ops {
  template <class Row>
  static void scores(const float* q, const Row* const* k, int32_t n, int32_t hd, float scale, float* s) {
    scores_rows(q, k, n, hd, scale, s);
  }
  template <class Row>
  static void scores2(const float* q0, const float* q1, const Row* const* k, int32_t n, int32_t hd, float scale,
                      float* s0, float* s1) {
    scores_rows2(q0, q1, k, n, hd, scale, s0, s1);
  }
  static float softmax_step(float* p, int32_t n, float& m, float& l) { return softmax_step_avx2(p, n, m, l); }
  template <class Row>
  static void accumulate(float* acc, float corr, const float* p, const Row* const* v, int32_t n, int32_t hd) {
    accumulate_rows(acc, corr, p, v, n, hd);
  }
  template <class Row>
  static void accumulate2(float* acc0, float corr0, const float* p0, float* acc1, float corr1, const float* p1,
                          const Row* const* v, int32_t n, int32_t hd) {
    accumulate_rows2(acc0, corr0, p0, acc1, corr1, p1, v, n, hd);
  }
  static constexpr bool kFusedF16 = true;
};

// Avx2Ops with the value sums over f16 rows, of one query or two, on 512-bit vectors (the same bits), where the
// AVX-512 level is active: a decode step's tile is faster on 16 lanes than on 8, with one query head per KV head or
// several (docs/performance-log.md, "decode's near fetches on every CPU").
struct Avx512Ops : Avx2Ops {
  template <class Row>
  static void accumulate(float* acc, float corr, const float* p, const Row* const* v, int32_t n, int32_t hd) {
    if constexpr (std::is_same_v<Row, uint8_t>) {
      if (hd % 16 == 0) return kernels::accumulate_rows_f16_avx512(acc, corr, p, v, n, hd);
    }
    accumulate_rows(acc, corr, p, v, n, hd);
  }
  template <class Row>
  static void accumulate2(float* acc0, float corr0, const float* p0, float* acc1, float corr1, const float* p1,
                          const Row* const* v, int32_t n, int32_t hd) {
    if constexpr (std::is_same_v<Row, uint8_t>) {
      if (hd % 16 == 0) return kernels::accumulate_rows2_f16_avx512(acc0, corr0, p0, acc1, corr1, p1, v, n, hd);
    }
    accumulate_rows2(acc0, corr0, p0, acc1, corr1, p1, v, n, hd);
  }
};

// A tile's running softmax state: per query (row-major over rows, then heads) the max m, the sum l and the
// unnormalized output acc; p holds two queries' scores, then probabilities, for one span.
struct OnlineState {
  float* m;
  float* l;
  float* acc;
  float* p;
};

// One span of keys for every query of KV head kv_head + h of the tile that reads any of them. k[j] and v[j] are
// key key0 + j's rows (floats, or f16 in place); keys before a query's window or after its position are skipped.
// Two queries with the same keys go through together and share every K and V load; what each computes is what
// it computes alone.
template <class Ops, class Row>
void attend_span(const AttentionTile& t, int32_t h, const Row* const* k, const Row* const* v, int32_t key0,
                 int32_t n_in, int32_t span, const OnlineState& st) {
  const int32_t hd = t.head_dim;
  const int32_t per_row = t.n_q_heads * t.n_kv_heads;
  float* p0 = st.p;
  float* p1 = st.p + span;
  auto query = [&](int32_t qi) { return t.q + (qi / per_row) * t.q_stride + (qi % per_row) * hd; };
  auto acc = [&](int32_t qi) { return st.acc + static_cast<size_t>(qi) * hd; };
  auto one = [&](int32_t qi, int32_t skip, int32_t nk) {
    Ops::scores(query(qi), k + skip, nk, hd, t.scale, p0);
    if (t.softcap > 0.0f) softcap_inplace(p0, nk, t.softcap);
    const float corr = Ops::softmax_step(p0, nk, st.m[qi], st.l[qi]);
    Ops::accumulate(acc(qi), corr, p0, v + skip, nk, hd);
  };
  auto two = [&](int32_t qa, int32_t qb, int32_t skip, int32_t nk) {
    Ops::scores2(query(qa), query(qb), k + skip, nk, hd, t.scale, p0, p1);
    if (t.softcap > 0.0f) {
      softcap_inplace(p0, nk, t.softcap);
      softcap_inplace(p1, nk, t.softcap);
    }
    const float corr_a = Ops::softmax_step(p0, nk, st.m[qa], st.l[qa]);
    const float corr_b = Ops::softmax_step(p1, nk, st.m[qb], st.l[qb]);
    Ops::accumulate2(acc(qa), corr_a, p0, acc(qb), corr_b, p1, v + skip, nk, hd);
  };
  int32_t pending = -1, pending_skip = 0, pending_nk = 0;
  for (int32_t r = std::max(0, key0 - t.first_pos); r < t.n_rows; ++r) {
    const int32_t skip = std::max(0, first_key_of(t, t.first_pos + r) - key0);
    const int32_t nk = std::min(n_in, t.first_pos + r - key0 + 1) - skip;
    if (nk <= 0) continue;
    for (int32_t g = 0; g < t.n_q_heads; ++g) {
      const int32_t qi = r * per_row + h * t.n_q_heads + g;
      if (pending >= 0 && pending_skip == skip && pending_nk == nk) {
        two(pending, qi, skip, nk);
        pending = -1;
        continue;
      }
      if (pending >= 0) one(pending, pending_skip, pending_nk);
      pending = qi;
      pending_skip = skip;
      pending_nk = nk;
    }
  }
  if (pending >= 0) one(pending, pending_skip, pending_nk);
}

std::atomic<F16KvReads> g_f16_reads{F16KvReads::kAuto};

// Whether a tile with this many queries per KV head reads f16 K/V in place (F16KvReads).
bool reads_f16_in_place(int32_t queries_per_kv_head) {
  switch (g_f16_reads.load(std::memory_order_relaxed)) {
    case F16KvReads::kInPlace:
      return true;
    case F16KvReads::kDequantized:
      return false;
    case F16KvReads::kAuto:
      break;
  }
  static const bool zen1 = cpu_is_zen1();
  return !(zen1 && queries_per_kv_head >= kF16DequantizeMinQueries);
}

// How far ahead of the (span, head) in use the per-query path asks for K/V, in spans. A decode step at depth reads
// every layer's K/V once, from memory (a 110M model's 2,000 tokens of f16 KV are 74 MB), and does little arithmetic
// per byte, so the wait for memory is what its attention costs. Two spans ahead beat one and four with K/V from
// memory, and speed up a 110M model's decode at depth; where weights dominate the step (1B), it changes nothing
// beyond the runs' spread. With K/V that stays in L3 across calls the fetches cost some time, but a model whose
// every layer's KV fits in L3 is one whose decode is fast anyway (docs/performance-log.md, "K/V fetched ahead
// from memory"). The fetches go through prefetch_line, which the compiler cannot delete as dead loads.
constexpr int32_t kPerQueryAheadSpans = 2;

template <class Ops>
void attention_tile_impl(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, float* scratch) {
  const int32_t hd = t.head_dim;
  HEARTH_CHECK(k.block_size >= 1 && v.block_size == k.block_size, "attention: block size {}", k.block_size);
  HEARTH_CHECK(t.n_kv_heads >= 1 && t.n_q_heads >= 1, "attention: {} KV heads of {} query heads", t.n_kv_heads,
               t.n_q_heads);
  const int32_t span = attention_span(hd);
  const int32_t per_row = t.n_q_heads * t.n_kv_heads;
  const int32_t n_queries = t.n_rows * per_row;
  const ScratchLayout lay(span, hd, n_queries);
  const OnlineState st{scratch + lay.m, scratch + lay.l, scratch + lay.acc, scratch + lay.p};
  std::fill(st.m, st.m + n_queries, -INFINITY);
  std::fill(st.l, st.l + n_queries, 0.0f);
  std::fill(st.acc, st.acc + static_cast<size_t>(n_queries) * hd, 0.0f);
  const float* k_rows[kMaxSpan];
  const float* v_rows[kMaxSpan];
  // f16 KV (the default) is read in place by the AVX2 ops, converted in registers as it is loaded, instead of
  // being dequantized into the tile first: with two queries sharing each load, that is faster for any number of
  // queries on the CPUs compared, except Zen 1 past a few queries (F16KvReads). The converted values are exact, so
  // either way gives the same bits.
  const bool fused = Ops::kFusedF16 && k.dtype == KvDtype::kF16 && v.dtype == KvDtype::kF16 && hd % 8 == 0 &&
                     reads_f16_in_place(t.n_rows * t.n_q_heads);
  const uint8_t* k_raw[kMaxSpan];
  const uint8_t* v_raw[kMaxSpan];

  // Spans are absolute key ranges, so a row's keys (and the order they are reduced in) depend on its position
  // alone; a row skips the spans, and the keys of a span, that lie before its window.
  const int32_t last_pos = t.first_pos + t.n_rows - 1;
  const int32_t first_key = first_key_of(t, t.first_pos);
  const int32_t wide_end =
      std::is_base_of_v<Avx2Ops, Ops>
          ? kernels::attend_prefix_wide(t, k, v, span, {scratch + lay.k_tile, scratch + lay.v_tile, scratch + lay.wide},
                                        st.m, st.l, st.acc)
          : 0;
  for (int32_t key0 = std::max(first_key / span * span, wide_end); key0 <= last_pos; key0 += span) {
    const int32_t n_in = std::min(span, last_pos + 1 - key0);
    const int32_t skip_min = std::max(0, first_key - key0);
    for (int32_t h = 0; h < t.n_kv_heads; ++h) {
      const int32_t kv_head = t.kv_head + h;
      // The span kPerQueryAheadSpans ahead of this (span, head) is asked for into L2 whole, when all its keys are
      // read (see kPerQueryAheadSpans).
      if (const int32_t ahead = key0 + kPerQueryAheadSpans * span; ahead + span <= last_pos + 1) {
        fetch_span_to_l2(k, kv_head, ahead, span);
        fetch_span_to_l2(v, kv_head, ahead, span);
      }
      if (fused) {
        head_rows(k, kv_head, key0 + skip_min, n_in - skip_min, k_raw + skip_min);
        head_rows(v, kv_head, key0 + skip_min, n_in - skip_min, v_raw + skip_min);
        if constexpr (Ops::kFusedF16) attend_span<Ops>(t, h, k_raw, v_raw, key0, n_in, span, st);
      } else {
        load_tile(k, kv_head, key0 + skip_min, n_in - skip_min, hd, scratch + lay.k_tile, k_rows + skip_min);
        load_tile(v, kv_head, key0 + skip_min, n_in - skip_min, hd, scratch + lay.v_tile, v_rows + skip_min);
        attend_span<Ops>(t, h, k_rows, v_rows, key0, n_in, span, st);
      }
    }
  }
  for (int32_t r = 0; r < t.n_rows; ++r) {
    for (int32_t i = 0; i < per_row; ++i) {
      const int32_t qi = r * per_row + i;
      // A sink's term, exp(sink - m) with m the row's running max, joins the sum (std::exp at every ISA level:
      // the same bits everywhere).
      const float sink = t.sinks != nullptr ? std::exp(t.sinks[i] - st.m[qi]) : 0.0f;
      const float inv = 1.0f / (st.l[qi] + sink);
      float* out = t.out + r * t.out_stride + static_cast<size_t>(i) * hd;
      for (int32_t d = 0; d < hd; ++d) out[d] = st.acc[static_cast<size_t>(qi) * hd + d] * inv;
    }
  }
}

}  // namespace

void set_f16_kv_reads(F16KvReads reads) {
  g_f16_reads.store(reads, std::memory_order_relaxed);
}

int32_t attention_span(int32_t head_dim) {
  return std::clamp(4096 / std::max(head_dim, 1) / 8 * 8, 16, kMaxSpan);
}

size_t attention_scratch_floats(int32_t head_dim, int32_t n_rows, int32_t n_query_heads) {
  return ScratchLayout(attention_span(head_dim), head_dim, n_rows * n_query_heads).total;
}

void attention_tile(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, float* scratch) {
  if (isa_at_least(IsaLevel::kAvx512Vnni)) {
    attention_tile_impl<Avx512Ops>(t, k, v, scratch);
  } else if (isa_at_least(IsaLevel::kAvx2)) {
    attention_tile_impl<Avx2Ops>(t, k, v, scratch);
  } else {
    attention_tile_impl<ScalarOps>(t, k, v, scratch);
  }
}

void attention_exp(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  if (isa_at_least(IsaLevel::kAvx2)) {
    for (; i + 8 <= n; i += 8) exp8_store(x + i, y + i);
  }
  for (; i < n; ++i) y[i] = exp_scalar(x[i]);
}

}  // namespace hearth

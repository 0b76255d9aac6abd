// Attention's wide path on 512-bit vectors: 16 queries of one KV head per vector, over one span of keys they all
// read whole (see attention_wide.h). Each lane performs exactly a query's per-query steps of attention.cpp:
//   score    8 chains over the dimensions (chain l takes d ≡ l mod 8, one fma each, in order), combined as
//            ((0+4)+(2+6)) + ((1+5)+(3+7)), times the scale;
//   softmax  m_new = max(m, max_j s_j), corr = exp(m - m_new), p_j = exp(s_j - m_new), their sum in 8 chains
//            (chain k takes j ≡ k mod 8) combined the same way, l = l·corr + sum;
//   values   acc = acc·corr, then acc += v_j·p_j for j in order, one fma per key.

#include <immintrin.h>

#include <type_traits>

#include "kernels/attention_wide.h"

// GCC 12's AVX-512 intrinsics pass an undefined vector as the merge source of their unmasked forms, which
// -W(maybe-)uninitialized reports at every inlined use; no lane of it is ever read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace hearth::kernels {
namespace {

#define HEARTH_WIDE_ATTN __attribute__((target("avx2,fma,avx512f")))

// attention.cpp's exp8 on 16 lanes: the same operations, so the same bits lane for lane.
HEARTH_WIDE_ATTN inline __m512 exp16(__m512 x) {
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 poly = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(kExpPoly[i]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(poly, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 out = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_LT_OQ), out, _mm512_setzero_ps());
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMax), _CMP_GT_OQ), out,
                             _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), out, x);  // NaN stays the NaN it was
}

// x, pinned in a register: an fma of it with a set1 of a float in memory then broadcasts that float inside the
// instruction ({1to16}, one load per fma), where GCC would otherwise fold x's load into each fma and broadcast the
// float separately (two loads per fma).
HEARTH_WIDE_ATTN inline __m512 in_register(__m512 x) {
  asm("" : "+v"(x));
  return x;
}

// ((c0+c4)+(c2+c6)) + ((c1+c5)+(c3+c7)), lane by lane.
HEARTH_WIDE_ATTN inline __m512 combine(const __m512* c) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c[0], c[4]), _mm512_add_ps(c[2], c[6])),
                       _mm512_add_ps(_mm512_add_ps(c[1], c[5]), _mm512_add_ps(c[3], c[7])));
}

// 16 consecutive elements of an f16 row (bytes) as floats, exactly as kv_dequantize_rows converts them.
HEARTH_WIDE_ATTN inline __m512 load16_f16(const uint8_t* row, int32_t i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
}

// Scores of keys k[0..K) for the group's 16 queries into s (K rows of 16): each element of a key is one
// broadcast for 16 fmas. Three keys keep 24 chains and the query vector in registers. f16 rows are converted
// into a small buffer first (the L1 then holds the group's arrays and the span's f16 rows, not float copies).
template <int K, class Row>
HEARTH_WIDE_ATTN inline void scores_keys(const float* qt, const Row* const* rows, int32_t hd, __m512 scale, float* s) {
  const float* k[K];
  alignas(64) float converted[std::is_same_v<Row, float> ? 1 : K * kWideMaxHeadDim];
  for (int t = 0; t < K; ++t) {
    if constexpr (std::is_same_v<Row, float>) {
      k[t] = rows[t];
    } else {
      float* dst = converted + t * kWideMaxHeadDim;
      for (int32_t d = 0; d < hd; d += 16) _mm512_store_ps(dst + d, load16_f16(rows[t], d));
      k[t] = dst;
    }
  }
  __m512 a[K][8];
#pragma GCC unroll 3
  for (int t = 0; t < K; ++t) {
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) a[t][l] = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int32_t d0 = 0; d0 < hd; d0 += 8) {
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m512 q = in_register(_mm512_load_ps(qt + (d0 + l) * kWideLanes));
#pragma GCC unroll 3
      for (int t = 0; t < K; ++t) a[t][l] = _mm512_fmadd_ps(q, _mm512_set1_ps(k[t][d0 + l]), a[t][l]);
    }
  }
#pragma GCC unroll 3
  for (int t = 0; t < K; ++t) _mm512_store_ps(s + t * kWideLanes, _mm512_mul_ps(combine(a[t]), scale));
}

// The softmax step on the n scores in pt (replaced by their p_j); returns corr.
HEARTH_WIDE_ATTN inline __m512 softmax_step(float* pt, int32_t n, float* m, float* l) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int32_t j = 0; j < n; ++j) vmax = _mm512_max_ps(vmax, _mm512_load_ps(pt + j * kWideLanes));
  const __m512 m_old = _mm512_load_ps(m);
  const __m512 m_new = _mm512_max_ps(m_old, vmax);
  const __m512 corr = exp16(_mm512_sub_ps(m_old, m_new));
  __m512 sums[8];
  for (__m512& s : sums) s = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; j += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      float* p = pt + (j + k) * kWideLanes;
      const __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(p), m_new));
      _mm512_store_ps(p, e);
      sums[k] = _mm512_add_ps(sums[k], e);
    }
  }
  _mm512_store_ps(l, _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(l), corr), combine(sums)));
  _mm512_store_ps(m, m_new);
  return corr;
}

// acc = acc·corr + Σ_j v_j·p_j, 16 dimensions (16 vectors of queries) at a time; f16 values of those 16
// dimensions are converted for all n keys first.
template <class Row>
HEARTH_WIDE_ATTN inline void accumulate(float* acct, __m512 corr, const float* pt, const Row* const* v, int32_t n,
                                        int32_t hd) {
  alignas(64) float converted[std::is_same_v<Row, float> ? 1 : kWideMaxSpan * 16];
  for (int32_t d0 = 0; d0 < hd; d0 += 16) {
    if constexpr (!std::is_same_v<Row, float>) {
      for (int32_t j = 0; j < n; ++j) _mm512_store_ps(converted + j * 16, load16_f16(v[j], d0));
    }
    __m512 a[16];
    for (int i = 0; i < 16; ++i) a[i] = _mm512_mul_ps(_mm512_load_ps(acct + (d0 + i) * kWideLanes), corr);
    for (int32_t j = 0; j < n; ++j) {
      const __m512 p = in_register(_mm512_load_ps(pt + j * kWideLanes));
      const float* vj;
      if constexpr (std::is_same_v<Row, float>) {
        vj = v[j] + d0;
      } else {
        vj = converted + j * 16;
      }
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(vj[i]), p, a[i]);
    }
    for (int i = 0; i < 16; ++i) _mm512_store_ps(acct + (d0 + i) * kWideLanes, a[i]);
  }
}

template <class Row>
HEARTH_WIDE_ATTN void attend_span(const WideGroup& g, const Row* const* k, const Row* const* v, int32_t n,
                                  int32_t head_dim, float scale, float* pt) {
  const __m512 vscale = _mm512_set1_ps(scale);
  int32_t j = 0;
  for (; j + 3 <= n; j += 3) scores_keys<3>(g.qt, k + j, head_dim, vscale, pt + j * kWideLanes);
  for (; j < n; ++j) scores_keys<1>(g.qt, k + j, head_dim, vscale, pt + j * kWideLanes);
  const __m512 corr = softmax_step(pt, n, g.m, g.l);
  accumulate(g.acct, corr, pt, v, n, head_dim);
}

}  // namespace

void wide_attend_span_avx512(const WideGroup& g, const float* const* k, const float* const* v, int32_t n,
                             int32_t head_dim, float scale, float* pt) {
  attend_span(g, k, v, n, head_dim, scale, pt);
}

void wide_attend_span_f16_avx512(const WideGroup& g, const uint8_t* const* k, const uint8_t* const* v, int32_t n,
                                 int32_t head_dim, float scale, float* pt) {
  attend_span(g, k, v, n, head_dim, scale, pt);
}

}  // namespace hearth::kernels

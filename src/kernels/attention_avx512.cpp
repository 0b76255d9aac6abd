// Attention's wide path on 512-bit vectors: 16 queries of one KV head per vector, over one span of keys they all
// read whole (see attention_wide.h). Each lane performs exactly a query's per-query steps of attention.cpp:
//   score    8 chains over the dimensions (chain l takes d ≡ l mod 8, one fma each, in order), combined as
//            ((0+4)+(2+6)) + ((1+5)+(3+7)), times the scale;
//   softmax  m_new = max(m, max_j s_j), corr = exp(m - m_new), p_j = exp(s_j - m_new), their sum in 8 chains
//            (chain k takes j ≡ k mod 8) combined the same way, l = l·corr + sum;
//   values   acc = acc·corr, then acc += v_j·p_j for j in order, one fma per key.

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/attention_rows.h"
#include "kernels/attention_wide.h"

// GCC 12's AVX-512 intrinsics pass an undefined vector as the merge source of their unmasked forms, which
// -W(maybe-)uninitialized reports at every inlined use; no lane of it is ever read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace hearth::kernels {
namespace {

#define HEARTH_WIDE_ATTN __attribute__((target("avx2,fma,avx512f")))

// attention.cpp's exp8 on 16 lanes for the softmax's arguments, s - m_new and m_old - m_new, which are at most 0
// or NaN: the same bits as exp8 there with fewer operations. No lane is above kExpMax; a NaN lane comes out of the
// arithmetic as the NaN it went in as (every operation passes its NaN operand on), where exp8 blends x back in; and
// for n >= -126 (x >= kExpMin) y·2^n is one exact scaling, scalef's as much as a multiply by the built power of 2.
// Fewer operations make a tile slightly faster (docs/performance-log.md, "decode's near fetches on every CPU").
HEARTH_WIDE_ATTN inline __m512 exp16_nonpositive(__m512 x) {
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 poly = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(kExpPoly[i]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(poly, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_NLT_UQ), y, n);
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

// Keys per block of scores_span.
inline constexpr int kScoreKeys = 8;

// Asks for the K and V head slices of keys [j, j + kScoreKeys) of `ahead` into L2.
inline void fetch_ahead(const WideAhead& ahead, int32_t j) {
  const int32_t n = std::min(kScoreKeys, ahead.n - j);
  fetch_rows_to_l2(ahead.k + j, n, ahead.k_bytes);
  fetch_rows_to_l2(ahead.v + j, n, ahead.v_bytes);
}

// The 8 chains of score `idx` (group idx / kScoreKeys, key idx % kScoreKeys of the block) in `part`, combined and
// scaled into that key's row of the group's scores.
HEARTH_WIDE_ATTN inline void finish_score(const float* part, int idx, __m512 scale, float* const* s, int32_t key0) {
  const float* c = part + static_cast<size_t>(idx) * 8 * kWideLanes;
  __m512 chain[8];
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) chain[l] = _mm512_load_ps(c + l * kWideLanes);
  const int r = idx / kScoreKeys, t = idx % kScoreKeys;
  _mm512_store_ps(s[r] + (key0 + t) * kWideLanes, _mm512_mul_ps(combine(chain), scale));
}

// The n scores (n a multiple of 8) of R groups' 16 queries each, into s[r] (n rows of 16), kScoreKeys keys at a time.
// Within a block, one chain at a time: chain l of every (group, key) pair runs over d = l, l+8, ... into its own
// register (R × kScoreKeys of them), then lands in `part`. So per dimension step each group's query vector is loaded
// once for the block's keys and each key element once for the R groups (two groups share it from a register), where a
// pair's 8 chains held in registers at once left room for 3 keys and cost 4 loads per 3 fmas, more than the load ports
// serve. A block's chains are combined while the next block's chains run (R scores after each chain), and the next
// block's f16 rows are converted there too (one row after each chain), so their loads, adds and stores go to ports the
// fmas leave idle. Done in phases of their own after each block, they take about a third as long as the fmas;
// interleaved, a span's scores cost little more than the fmas alone (docs/performance-log.md, "decode's near fetches on
// every CPU").
template <int R, class Row>
HEARTH_WIDE_ATTN inline void scores_span(const float* const* qt, const Row* const* rows, int32_t n, int32_t hd,
                                         __m512 scale, float* const* s, const WideAhead& ahead) {
  constexpr int K = kScoreKeys;  // one row of the next block converted after each of the 8 chains
  constexpr bool kF16 = !std::is_same_v<Row, float>;
  alignas(64) float converted[2][kF16 ? K * kWideMaxHeadDim : 1];
  alignas(64) float part[2][R * K * 8 * kWideLanes];
  if constexpr (kF16) {
#pragma GCC unroll 8
    for (int t = 0; t < K; ++t) {
      for (int32_t d = 0; d < hd; d += 16)
        _mm512_store_ps(converted[0] + t * kWideMaxHeadDim + d, load16_f16(rows[t], d));
    }
  }
  for (int32_t j = 0; j < n; j += K) {
    const int cur = (j / K) & 1, other = cur ^ 1;
    const bool prev = j > 0, next = j + K < n;
    if (ahead.n > 0) fetch_ahead(ahead, j);
    const float* k[K];
#pragma GCC unroll 8
    for (int t = 0; t < K; ++t) {
      if constexpr (kF16) {
        k[t] = converted[cur] + t * kWideMaxHeadDim;
      } else {
        k[t] = rows[j + t];
      }
    }
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      __m512 a[R][K];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int t = 0; t < K; ++t) a[r][t] = _mm512_setzero_ps();
      }
#pragma GCC unroll 8
      for (int32_t d = l; d < hd; d += 8) {
        __m512 q[R];
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) q[r] = in_register(_mm512_load_ps(qt[r] + d * kWideLanes));
#pragma GCC unroll 8
        for (int t = 0; t < K; ++t) {
          if constexpr (R == 1) {
            a[0][t] = _mm512_fmadd_ps(q[0], _mm512_set1_ps(k[t][d]), a[0][t]);
          } else {
            const __m512 b = in_register(_mm512_set1_ps(k[t][d]));
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) a[r][t] = _mm512_fmadd_ps(q[r], b, a[r][t]);
          }
        }
      }
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int t = 0; t < K; ++t) _mm512_store_ps(part[cur] + ((r * K + t) * 8 + l) * kWideLanes, a[r][t]);
      }
      if (prev) {
#pragma GCC unroll 2
        for (int i = 0; i < R; ++i) finish_score(part[other], l * R + i, scale, s, j - K);
      }
      if constexpr (kF16) {
        if (next) {
          for (int32_t d = 0; d < hd; d += 16)
            _mm512_store_ps(converted[other] + l * kWideMaxHeadDim + d, load16_f16(rows[j + K + l], d));
        }
      }
    }
  }
  for (int idx = 0; idx < R * K; ++idx) finish_score(part[((n - 1) / K) & 1], idx, scale, s, n - K);
}

// The softmax step on the n scores in pt (replaced by their p_j); returns corr.
HEARTH_WIDE_ATTN inline __m512 softmax_step(float* pt, int32_t n, float* m, float* l) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int32_t j = 0; j < n; ++j) vmax = _mm512_max_ps(vmax, _mm512_load_ps(pt + j * kWideLanes));
  const __m512 m_old = _mm512_load_ps(m);
  const __m512 m_new = _mm512_max_ps(m_old, vmax);
  const __m512 corr = exp16_nonpositive(_mm512_sub_ps(m_old, m_new));
  __m512 sums[8];
  for (__m512& s : sums) s = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; j += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      float* p = pt + (j + k) * kWideLanes;
      const __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_load_ps(p), m_new));
      _mm512_store_ps(p, e);
      sums[k] = _mm512_add_ps(sums[k], e);
    }
  }
  _mm512_store_ps(l, _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(l), corr), combine(sums)));
  _mm512_store_ps(m, m_new);
  return corr;
}

// softmax_step for a span whose lane i reads only its first visible[i] keys, as the per-query step over those keys:
// the max over them, their terms summed in 8 chains (chain k takes j ≡ k mod 8) up to the lane's last multiple of
// 8, the chains combined, then the lane's remaining terms added in order. Keys past a lane's count get p = 0 there
// (or NaN on a lane that reads none and never read a key before; accumulate skips them either way), and a lane
// that reads none gets corr = 1, so l = l·1 + 0 and acc·1 keep its state.
HEARTH_WIDE_ATTN inline __m512 softmax_step_visible(float* pt, int32_t n, float* m, float* l, const int32_t* visible) {
  const __m512i nk = _mm512_loadu_si512(visible);
  const __m512i n8 = _mm512_andnot_si512(_mm512_set1_epi32(7), nk);
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = minus_inf;
  for (int32_t j = 0; j < n; ++j) {
    float* p = pt + j * kWideLanes;
    const __m512 s =
        _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(nk, _mm512_set1_epi32(j)), minus_inf, _mm512_load_ps(p));
    _mm512_store_ps(p, s);
    vmax = _mm512_max_ps(vmax, s);
  }
  const __m512 m_old = _mm512_load_ps(m);
  const __m512 m_new = _mm512_max_ps(m_old, vmax);
  const __mmask16 reads = _mm512_cmpgt_epi32_mask(nk, _mm512_setzero_si512());
  const __m512 corr = _mm512_mask_blend_ps(reads, _mm512_set1_ps(1.0f), exp16_nonpositive(_mm512_sub_ps(m_old, m_new)));
  __m512 sums[8];
  for (__m512& c : sums) c = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; ++j) {
    float* p = pt + j * kWideLanes;
    const __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_load_ps(p), m_new));
    _mm512_store_ps(p, e);
    sums[j % 8] = _mm512_mask_add_ps(sums[j % 8], _mm512_cmpgt_epi32_mask(n8, _mm512_set1_epi32(j)), sums[j % 8], e);
  }
  __m512 sum = combine(sums);
  for (int32_t j = 0; j < n; ++j) {
    const __m512i vj = _mm512_set1_epi32(j);
    const __mmask16 tail = _mm512_cmpgt_epi32_mask(nk, vj) & _mm512_cmple_epi32_mask(n8, vj);
    sum = _mm512_mask_add_ps(sum, tail, sum, _mm512_load_ps(pt + j * kWideLanes));
  }
  _mm512_store_ps(l, _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(l), corr), sum));
  _mm512_store_ps(m, m_new);
  return corr;
}

// acc = acc·corr + Σ_j v_j·p_j for R groups, 16 dimensions (16 vectors of queries) at a time; f16 values of
// those 16 dimensions are converted for all n keys first, once for the R groups.
// kVisible: lane i of group r takes only keys j < g[r].visible[i] (masked fmas), as the per-query step over its
// keys does.
template <int R, class Row, bool kVisible>
  requires(R == 1 || R == 2)
HEARTH_WIDE_ATTN inline void accumulate(const WideGroup* g, const __m512* corr, float* const* pt, const Row* const* v,
                                        int32_t n, int32_t hd) {
  __m512i nk[R];  // the lanes that read key j: nk > j (every lane without kVisible, a mask the compiler folds away)
  for (int r = 0; r < R; ++r) nk[r] = kVisible ? _mm512_loadu_si512(g[r].visible) : _mm512_set1_epi32(n);
  auto reads = [](__m512i lanes_nk, int32_t j) HEARTH_WIDE_ATTN -> __mmask16 {
    if constexpr (kVisible) {
      return _mm512_cmpgt_epi32_mask(lanes_nk, _mm512_set1_epi32(j));
    } else {
      return static_cast<__mmask16>(0xffff);
    }
  };
  alignas(64) float converted[std::is_same_v<Row, float> ? 1 : kWideMaxSpan * 16];
  for (int32_t d0 = 0; d0 < hd; d0 += 16) {
    if constexpr (!std::is_same_v<Row, float>) {
      for (int32_t j = 0; j < n; ++j) _mm512_store_ps(converted + j * 16, load16_f16(v[j], d0));
    }
    if constexpr (R == 2) {
      // Both groups at once, 8 dimensions at a time: each value element is loaded once, into a register, for
      // both groups' fmas.
      for (int32_t h = 0; h < 16; h += 8) {
        __m512 a[2][8];
        for (int r = 0; r < 2; ++r) {
          for (int i = 0; i < 8; ++i)
            a[r][i] = _mm512_mul_ps(_mm512_load_ps(g[r].acct + (d0 + h + i) * kWideLanes), corr[r]);
        }
        for (int32_t j = 0; j < n; ++j) {
          const __m512 p0 = in_register(_mm512_load_ps(pt[0] + j * kWideLanes));
          const __m512 p1 = in_register(_mm512_load_ps(pt[1] + j * kWideLanes));
          const float* vj;
          if constexpr (std::is_same_v<Row, float>) {
            vj = v[j] + d0 + h;
          } else {
            vj = converted + j * 16 + h;
          }
          const __mmask16 r0 = reads(nk[0], j), r1 = reads(nk[1], j);
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) {
            const __m512 b = in_register(_mm512_set1_ps(vj[i]));
            a[0][i] = _mm512_mask3_fmadd_ps(b, p0, a[0][i], r0);
            a[1][i] = _mm512_mask3_fmadd_ps(b, p1, a[1][i], r1);
          }
        }
        for (int r = 0; r < 2; ++r) {
          for (int i = 0; i < 8; ++i) _mm512_store_ps(g[r].acct + (d0 + h + i) * kWideLanes, a[r][i]);
        }
      }
    } else {
      float* acct = g[0].acct;
      __m512 a[16];
      for (int i = 0; i < 16; ++i) a[i] = _mm512_mul_ps(_mm512_load_ps(acct + (d0 + i) * kWideLanes), corr[0]);
      for (int32_t j = 0; j < n; ++j) {
        const __m512 p = in_register(_mm512_load_ps(pt[0] + j * kWideLanes));
        const float* vj;
        if constexpr (std::is_same_v<Row, float>) {
          vj = v[j] + d0;
        } else {
          vj = converted + j * 16;
        }
        const __mmask16 r0 = reads(nk[0], j);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) a[i] = _mm512_mask3_fmadd_ps(_mm512_set1_ps(vj[i]), p, a[i], r0);
      }
      for (int i = 0; i < 16; ++i) _mm512_store_ps(acct + (d0 + i) * kWideLanes, a[i]);
    }
  }
}

template <int R, class Row>
HEARTH_WIDE_ATTN void attend_span(const WideGroup* g, const Row* const* k, const Row* const* v, int32_t n,
                                  int32_t head_dim, float scale, float* pt, const WideAhead& ahead) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const float* qt[R];
  float* p[R];
  for (int r = 0; r < R; ++r) {
    qt[r] = g[r].qt;
    p[r] = pt + static_cast<size_t>(r) * n * kWideLanes;
  }
  scores_span<R>(qt, k, n, head_dim, vscale, p, ahead);
  __m512 corr[R];
  if (g[0].visible != nullptr) {
    for (int r = 0; r < R; ++r) corr[r] = softmax_step_visible(p[r], n, g[r].m, g[r].l, g[r].visible);
    accumulate<R, Row, true>(g, corr, p, v, n, head_dim);
  } else {
    for (int r = 0; r < R; ++r) corr[r] = softmax_step(p[r], n, g[r].m, g[r].l);
    accumulate<R, Row, false>(g, corr, p, v, n, head_dim);
  }
}

template <class Row>
void attend_span_groups(const WideGroup* g, int32_t n_groups, const Row* const* k, const Row* const* v, int32_t n,
                        int32_t head_dim, float scale, float* pt, const WideAhead& ahead) {
  if (n_groups == 2) {
    attend_span<2>(g, k, v, n, head_dim, scale, pt, ahead);
  } else {
    attend_span<1>(g, k, v, n, head_dim, scale, pt, ahead);
  }
}

// attention.cpp's accumulate_rows (Q = 1) and accumulate_rows2 (Q = 2) on 16 lanes, for f16 value rows and head
// sizes that are multiples of 16: each element's arithmetic is the same (acc × corr, then one fma per key in
// order), so the bits are too; a value row takes half the conversions and fmas it takes on 8 lanes. The scores stay
// on 8 lanes: two keys' 8 lanes per vector, their halves through combine8, are no faster.
// Dimensions [d0, d0 + 16C) of accumulate_queries.
template <int Q, int C>
HEARTH_WIDE_ATTN inline void accumulate_block(float* const (&acc)[Q], const float (&corr)[Q],
                                              const float* const (&p)[Q], const uint8_t* const* v, int32_t n,
                                              int32_t d0) {
  __m512 a[Q][C];
  for (int q = 0; q < Q; ++q) {
    const __m512 c = _mm512_set1_ps(corr[q]);
    for (int k = 0; k < C; ++k) a[q][k] = _mm512_mul_ps(_mm512_loadu_ps(acc[q] + d0 + 16 * k), c);
  }
  for (int32_t j = 0; j < n; ++j) {
    __m512 x[Q];
    for (int q = 0; q < Q; ++q) x[q] = _mm512_set1_ps(p[q][j]);
    for (int k = 0; k < C; ++k) {
      const __m512 vv = load16_f16(v[j], d0 + 16 * k);
      for (int q = 0; q < Q; ++q) a[q][k] = _mm512_fmadd_ps(vv, x[q], a[q][k]);
    }
  }
  for (int q = 0; q < Q; ++q) {
    for (int k = 0; k < C; ++k) _mm512_storeu_ps(acc[q] + d0 + 16 * k, a[q][k]);
  }
}

template <int Q>
HEARTH_WIDE_ATTN void accumulate_queries(float* const (&acc)[Q], const float (&corr)[Q], const float* const (&p)[Q],
                                         const uint8_t* const* v, int32_t n, int32_t hd) {
  int32_t d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) accumulate_block<Q, 4>(acc, corr, p, v, n, d0);
  for (; d0 + 16 <= hd; d0 += 16) accumulate_block<Q, 1>(acc, corr, p, v, n, d0);
}

}  // namespace

void wide_attend_span_avx512(const WideGroup* g, int32_t n_groups, const float* const* k, const float* const* v,
                             int32_t n, int32_t head_dim, float scale, float* pt, const WideAhead& ahead) {
  attend_span_groups(g, n_groups, k, v, n, head_dim, scale, pt, ahead);
}

void wide_attend_span_f16_avx512(const WideGroup* g, int32_t n_groups, const uint8_t* const* k,
                                 const uint8_t* const* v, int32_t n, int32_t head_dim, float scale, float* pt,
                                 const WideAhead& ahead) {
  attend_span_groups(g, n_groups, k, v, n, head_dim, scale, pt, ahead);
}

void accumulate_rows_f16_avx512(float* acc, float corr, const float* p, const uint8_t* const* v, int32_t n,
                                int32_t hd) {
  accumulate_queries<1>({acc}, {corr}, {p}, v, n, hd);
}

void accumulate_rows2_f16_avx512(float* acc0, float corr0, const float* p0, float* acc1, float corr1, const float* p1,
                                 const uint8_t* const* v, int32_t n, int32_t hd) {
  accumulate_queries<2>({acc0, acc1}, {corr0, corr1}, {p0, p1}, v, n, hd);
}

}  // namespace hearth::kernels

#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/dot_lanes.h"
#include "kernels/ops.h"
#include "tensor/fp16.h"
#include "util/result.h"

namespace hearth {
namespace {

#define HEARTH_AVX2_ATTN __attribute__((target("avx2,fma,f16c")))

// Scratch layout of attention_tile, in floats.
struct ScratchLayout {
  size_t k_tile, v_tile, p, m, l, acc, total;
  ScratchLayout(int32_t block_size, int32_t head_dim, int32_t n_queries) {
    const size_t tile = static_cast<size_t>(block_size) * head_dim;
    k_tile = 0;
    v_tile = k_tile + tile;
    p = v_tile + tile;
    m = p + block_size;
    l = m + n_queries;
    acc = l + n_queries;
    total = acc + static_cast<size_t>(n_queries) * head_dim;
  }
};

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
  static void dequantize(KvDtype type, const uint8_t* src, float* dst, int32_t hd) {
    kv_dequantize_head_reference(type, src, dst, hd);
  }
  static constexpr bool kFusedF16 = false;
};

HEARTH_AVX2_ATTN void scores_avx2(const float* q, const float* const* k, int32_t n, int32_t hd, float scale, float* s) {
  for (int32_t j = 0; j < n; ++j) s[j] = kernels::dot_lanes_avx2(q, k[j], hd) * scale;
}

// 8 consecutive elements of a key or value row as fp32: a float row as is, an f16 row (bytes) converted exactly
// as dequantize_avx2 converts it.
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

// f16 keys and values read in place (hd % 8 == 0): each element converted to fp32 exactly as dequantize_avx2 does,
// then the same fma as scores_avx2 (dot_lanes_avx2's lanes and combination) and accumulate_rows, so the results
// are bitwise theirs on the dequantized tile, without writing the tile.
HEARTH_AVX2_ATTN void scores_f16(const float* q, const uint8_t* const* k, int32_t n, int32_t hd, float scale,
                                 float* s) {
  for (int32_t j = 0; j < n; ++j) {
    __m256 acc = _mm256_setzero_ps();
    for (int32_t i = 0; i < hd; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k[j], i), acc);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    s[j] = kernels::combine_lanes(lanes) * scale;
  }
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

HEARTH_AVX2_ATTN void dequantize_avx2(KvDtype type, const uint8_t* src, float* dst, int32_t hd) {
  switch (type) {
    case KvDtype::kF16:
      if (hd % 8 != 0) break;
      for (int32_t i = 0; i < hd; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
      }
      return;
    case KvDtype::kBF16:
      if (hd % 8 != 0) break;
      for (int32_t i = 0; i < hd; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
      }
      return;
    case KvDtype::kQ8_0: {
      const int32_t g = *kv_group_size(type, hd);
      if (g % 8 != 0) break;
      for (int32_t i = 0; i < hd; i += g, src += 2 + g) {
        const __m256 d = _mm256_set1_ps(fp16_to_fp32(load_u16(src)));
        for (int32_t k = 0; k < g; k += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + k));
          _mm256_storeu_ps(dst + i + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    case KvDtype::kQ4_0: {
      const int32_t g = *kv_group_size(type, hd);
      if (g % 16 != 0) break;
      const __m128i low = _mm_set1_epi8(0x0F);
      const __m256i eight = _mm256_set1_epi32(8);
      for (int32_t i = 0; i < hd; i += g, src += 2 + g / 2) {
        const __m256 d = _mm256_set1_ps(fp16_to_fp32(load_u16(src)));
        for (int32_t k = 0; k < g; k += 16) {
          const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + k / 2));
          // Byte t holds values 2t (low nibble) and 2t+1 (high): interleave to restore their order.
          const __m128i vals = _mm_unpacklo_epi8(_mm_and_si128(b, low), _mm_and_si128(_mm_srli_epi16(b, 4), low));
          const __m256i lo = _mm256_sub_epi32(_mm256_cvtepu8_epi32(vals), eight);
          const __m256i hi = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(vals, 8)), eight);
          _mm256_storeu_ps(dst + i + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
          _mm256_storeu_ps(dst + i + k + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
      }
      return;
    }
    case KvDtype::kF32:
      break;
  }
  kv_dequantize_head_reference(type, src, dst, hd);
}

struct Avx2Ops {
  static void scores(const float* q, const float* const* k, int32_t n, int32_t hd, float scale, float* s) {
    scores_avx2(q, k, n, hd, scale, s);
  }
  static void accumulate(float* acc, float corr, const float* p, const float* const* v, int32_t n, int32_t hd) {
    accumulate_rows(acc, corr, p, v, n, hd);
  }
  static void dequantize(KvDtype type, const uint8_t* src, float* dst, int32_t hd) {
    dequantize_avx2(type, src, dst, hd);
  }
  static constexpr bool kFusedF16 = true;
  static void scores_f16(const float* q, const uint8_t* const* k, int32_t n, int32_t hd, float scale, float* s) {
    hearth::scores_f16(q, k, n, hd, scale, s);
  }
  static void accumulate_f16(float* acc, float corr, const float* p, const uint8_t* const* v, int32_t n, int32_t hd) {
    accumulate_rows(acc, corr, p, v, n, hd);
  }
};

constexpr int32_t kMaxBlockSize = 1024;

// The first key a query at `pos` reads.
int32_t first_key_of(const AttentionTile& t, int32_t pos) {
  return t.window > 0 ? std::max(0, pos - t.window + 1) : 0;
}

// Points rows[j] at key (or value) key0 + j's head slice as floats: straight into storage for f32, otherwise
// dequantized into `tile`.
template <class Ops>
void load_tile(const PagedKvView& kv, int32_t kv_head, int32_t key0, int32_t n, int32_t hd, float* tile,
               const float** rows) {
  for (int32_t j = 0; j < n; ++j) {
    const uint8_t* src = kv.head(key0 + j, kv_head);
    if (kv.dtype == KvDtype::kF32) {
      rows[j] = reinterpret_cast<const float*>(src);
    } else {
      Ops::dequantize(kv.dtype, src, tile + static_cast<size_t>(j) * hd, hd);
      rows[j] = tile + static_cast<size_t>(j) * hd;
    }
  }
}

template <class Ops>
void attention_tile_impl(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, float* scratch) {
  const int32_t hd = t.head_dim;
  const int32_t bs = k.block_size;
  HEARTH_CHECK(bs >= 1 && bs <= kMaxBlockSize && v.block_size == bs, "attention: block size {}", bs);
  const int32_t n_queries = t.n_rows * t.n_q_heads;
  const ScratchLayout lay(bs, hd, n_queries);
  float* m = scratch + lay.m;
  float* l = scratch + lay.l;
  float* acc = scratch + lay.acc;
  float* p = scratch + lay.p;
  std::fill(m, m + n_queries, -INFINITY);
  std::fill(l, l + n_queries, 0.0f);
  std::fill(acc, acc + static_cast<size_t>(n_queries) * hd, 0.0f);
  const float* k_rows[kMaxBlockSize];
  const float* v_rows[kMaxBlockSize];
  // f16 KV (the default) is read in place by the AVX2 ops instead of being dequantized into the tile first.
  const bool fused = Ops::kFusedF16 && k.dtype == KvDtype::kF16 && v.dtype == KvDtype::kF16 && hd % 8 == 0;
  const uint8_t* k_raw[kMaxBlockSize];
  const uint8_t* v_raw[kMaxBlockSize];

  // Tiles are the absolute KV blocks, so a row's keys (and the order they are reduced in) depend on its
  // position alone; a row skips the tiles, and the keys of a tile, that lie before its window.
  const int32_t last_pos = t.first_pos + t.n_rows - 1;
  const int32_t first_key = first_key_of(t, t.first_pos);
  for (int32_t key0 = first_key / bs * bs; key0 <= last_pos; key0 += bs) {
    const int32_t n_in = std::min(bs, last_pos + 1 - key0);
    const int32_t skip_min = std::max(0, first_key - key0);
    if (fused) {
      for (int32_t j = skip_min; j < n_in; ++j) {
        k_raw[j] = k.head(key0 + j, t.kv_head);
        v_raw[j] = v.head(key0 + j, t.kv_head);
      }
    } else {
      load_tile<Ops>(k, t.kv_head, key0 + skip_min, n_in - skip_min, hd, scratch + lay.k_tile, k_rows + skip_min);
      load_tile<Ops>(v, t.kv_head, key0 + skip_min, n_in - skip_min, hd, scratch + lay.v_tile, v_rows + skip_min);
    }
    for (int32_t r = std::max(0, key0 - t.first_pos); r < t.n_rows; ++r) {
      const int32_t skip = std::max(0, first_key_of(t, t.first_pos + r) - key0);
      const int32_t nk = std::min(n_in, t.first_pos + r - key0 + 1) - skip;
      if (nk <= 0) continue;
      for (int32_t g = 0; g < t.n_q_heads; ++g) {
        const int32_t qi = r * t.n_q_heads + g;
        const float* q = t.q + r * t.q_stride + static_cast<size_t>(g) * hd;
        if constexpr (Ops::kFusedF16) {
          if (fused) {
            Ops::scores_f16(q, k_raw + skip, nk, hd, t.scale, p);
          } else {
            Ops::scores(q, k_rows + skip, nk, hd, t.scale, p);
          }
        } else {
          Ops::scores(q, k_rows + skip, nk, hd, t.scale, p);
        }
        if (t.softcap > 0.0f) softcap_inplace(p, nk, t.softcap);
        float tile_max = -INFINITY;
        for (int32_t j = 0; j < nk; ++j) tile_max = std::max(tile_max, p[j]);
        const float m_new = std::max(m[qi], tile_max);
        const float corr = std::exp(m[qi] - m_new);
        float sum = 0.0f;
        for (int32_t j = 0; j < nk; ++j) {
          p[j] = std::exp(p[j] - m_new);
          sum += p[j];
        }
        l[qi] = l[qi] * corr + sum;
        m[qi] = m_new;
        float* out = acc + static_cast<size_t>(qi) * hd;
        if constexpr (Ops::kFusedF16) {
          if (fused) {
            Ops::accumulate_f16(out, corr, p, v_raw + skip, nk, hd);
          } else {
            Ops::accumulate(out, corr, p, v_rows + skip, nk, hd);
          }
        } else {
          Ops::accumulate(out, corr, p, v_rows + skip, nk, hd);
        }
      }
    }
  }
  for (int32_t r = 0; r < t.n_rows; ++r) {
    for (int32_t g = 0; g < t.n_q_heads; ++g) {
      const int32_t qi = r * t.n_q_heads + g;
      const float inv = 1.0f / l[qi];
      float* out = t.out + r * t.out_stride + static_cast<size_t>(g) * hd;
      for (int32_t d = 0; d < hd; ++d) out[d] = acc[static_cast<size_t>(qi) * hd + d] * inv;
    }
  }
}

}  // namespace

size_t attention_scratch_floats(int32_t block_size, int32_t head_dim, int32_t n_rows, int32_t n_q_heads) {
  return ScratchLayout(block_size, head_dim, n_rows * n_q_heads).total;
}

void attention_tile(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, float* scratch) {
  if (isa_at_least(IsaLevel::kAvx2)) {
    attention_tile_impl<Avx2Ops>(t, k, v, scratch);
  } else {
    attention_tile_impl<ScalarOps>(t, k, v, scratch);
  }
}

void kv_dequantize_head(KvDtype type, const uint8_t* src, float* dst, int32_t head_dim) {
  if (isa_at_least(IsaLevel::kAvx2)) {
    dequantize_avx2(type, src, dst, head_dim);
  } else {
    kv_dequantize_head_reference(type, src, dst, head_dim);
  }
}

void attention_tile_reference(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v) {
  const int32_t hd = t.head_dim;
  std::vector<float> kj(hd), vj(hd);
  for (int32_t r = 0; r < t.n_rows; ++r) {
    const int32_t j0 = first_key_of(t, t.first_pos + r);
    const int32_t n_keys = t.first_pos + r + 1 - j0;
    for (int32_t g = 0; g < t.n_q_heads; ++g) {
      const float* q = t.q + r * t.q_stride + static_cast<size_t>(g) * hd;
      std::vector<double> s(n_keys);
      double max_score = -INFINITY;
      for (int32_t j = 0; j < n_keys; ++j) {
        kv_dequantize_head_reference(k.dtype, k.head(j0 + j, t.kv_head), kj.data(), hd);
        double dot = 0.0;
        for (int32_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * kj[d];
        s[j] = dot * t.scale;
        if (t.softcap > 0.0f) s[j] = t.softcap * std::tanh(s[j] / t.softcap);
        max_score = std::max(max_score, s[j]);
      }
      double sum = 0.0;
      for (double& x : s) sum += (x = std::exp(x - max_score));
      std::vector<double> out(hd, 0.0);
      for (int32_t j = 0; j < n_keys; ++j) {
        kv_dequantize_head_reference(v.dtype, v.head(j0 + j, t.kv_head), vj.data(), hd);
        for (int32_t d = 0; d < hd; ++d) out[d] += s[j] / sum * vj[d];
      }
      float* o = t.out + r * t.out_stride + static_cast<size_t>(g) * hd;
      for (int32_t d = 0; d < hd; ++d) o[d] = static_cast<float>(out[d]);
    }
  }
}

}  // namespace hearth

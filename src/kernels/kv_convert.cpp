#include "kernels/kv_convert.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu_isa.h"
#include "tensor/fp16.h"

namespace hearth {
namespace {

#define HEARTH_AVX2_KV __attribute__((target("avx2,fma,f16c")))

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

HEARTH_AVX2_KV void dequantize_avx2(KvDtype type, const uint8_t* src, float* dst, int32_t hd) {
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

// dequantize_avx2's f16 conversion for n rows at once (hd % 8 == 0).
HEARTH_AVX2_KV void dequantize_f16_rows(const uint8_t* const* src, int32_t n, float* dst, int32_t hd) {
  for (int32_t j = 0; j < n; ++j, dst += hd) {
    for (int32_t i = 0; i < hd; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[j] + 2 * i))));
  }
}

// fp32 to f16 with F16C, round to nearest even: the bits of fp32_to_fp16 for every input, NaNs quieted with their
// top payload bits as it keeps them (KvStore.F16VectorPathIsBytewiseTheScalarOne).
HEARTH_AVX2_KV void store_f16_avx2(const float* src, uint8_t* dst, int32_t n) {
  for (int32_t i = 0; i < n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

}  // namespace

void kv_store_head(KvDtype type, const float* src, uint8_t* dst, int32_t head_dim) {
  if (type == KvDtype::kF16 && head_dim % 8 == 0 && isa_at_least(IsaLevel::kAvx2)) {
    store_f16_avx2(src, dst, head_dim);
  } else {
    kv_quantize_head(type, src, dst, head_dim);
  }
}

void kv_dequantize_head(KvDtype type, const uint8_t* src, float* dst, int32_t head_dim) {
  if (isa_at_least(IsaLevel::kAvx2)) {
    dequantize_avx2(type, src, dst, head_dim);
  } else {
    kv_dequantize_head_reference(type, src, dst, head_dim);
  }
}

void kv_dequantize_rows(KvDtype type, const uint8_t* const* src, int32_t n, float* dst, int32_t head_dim) {
  if (!isa_at_least(IsaLevel::kAvx2)) {
    for (int32_t j = 0; j < n; ++j)
      kv_dequantize_head_reference(type, src[j], dst + static_cast<size_t>(j) * head_dim, head_dim);
  } else if (type == KvDtype::kF16 && head_dim % 8 == 0) {
    dequantize_f16_rows(src, n, dst, head_dim);
  } else {
    for (int32_t j = 0; j < n; ++j) dequantize_avx2(type, src[j], dst + static_cast<size_t>(j) * head_dim, head_dim);
  }
}

}  // namespace hearth

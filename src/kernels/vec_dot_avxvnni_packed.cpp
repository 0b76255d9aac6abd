// AVX-VNNI tiles for packed weights (packed.h): packed_tiles.inc with vpdpbusd and vpdpwssd themselves.
//
// A tile is one group of 8 rows × up to 4 tokens. Per block (or sub-block), each token's 8 row sums take one
// vpdpbusd per four columns (the packed weights as the unsigned operand, the token's four activation bytes
// broadcast as the signed one), so lane r ends as row r's exact integer sum, the weights' unsigned offset taken
// back by the activation's correction. Then, as the scalar reference does for every output, the block's fp32 step:
//   Q8_0, Q4_0: sum = sum + (d_w·d_x)·float(Σ w·x)
//   Q4_K, Q5_K: sum = sum + ((d_w·d_x)·float(sumi) − (dmin_w·d_x)·float(summ))
//   Q6_K, Q3_K, IQ4_XS: sum = sum + (d_w·d_x)·float(sumi)
// (the expressions of the vec_dot_*_reference twins), one fp32 accumulator per output, the same operations in the
// same order for every tile shape and every batch, so every output is bitwise vec_dot_reference's.

#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/packed.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"

#define HEARTH_PACKED __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace hearth::kernels {
namespace {

HEARTH_PACKED inline __m256i dpbusd_pair(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, u0, s0), u1, s1);
}

HEARTH_PACKED inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_avx_epi32(acc, a, b);
}

// vpdpbusd takes the whole unsigned range, so wide weights need nothing more.
struct Wide {
  __m256i u;
};

HEARTH_PACKED inline Wide wide_weights(__m256i u) {
  return {u};
}

HEARTH_PACKED inline __m256i dpbusd_wide(__m256i acc, Wide w, __m256i s) {
  return _mm256_dpbusd_avx_epi32(acc, w.u, s);
}

inline constexpr bool kWideOffsetInSum = true;

// vpdpbusd widens and accumulates in one instruction: no int16 sums.
inline constexpr bool kInt16Sums = false;

#include "kernels/packed_tiles.inc"

}  // namespace

constinit const TileKernel kTilePackedAvxVnniQ8_0 = kPackedTileQ8_0;
constinit const TileKernel kTilePackedAvxVnniQ4_0 = kPackedTileQ4_0;
constinit const TileKernel kTilePackedAvxVnniQ3_K = kPackedTileQ3_K;
constinit const TileKernel kTilePackedAvxVnniQ4_K = kPackedTileQ4_K;
constinit const TileKernel kTilePackedAvxVnniQ5_K = kPackedTileQ5_K;
constinit const TileKernel kTilePackedAvxVnniQ6_K = kPackedTileQ6_K;
constinit const TileKernel kTilePackedAvxVnniIQ4_XS = kPackedTileIQ4_XS;
constinit const TileKernel kTilePackedAvxVnniMXFP4 = kPackedTileMXFP4;

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTilePackedAvxVnniQ8_0{};
constinit const TileKernel kTilePackedAvxVnniQ4_0{};
constinit const TileKernel kTilePackedAvxVnniQ3_K{};
constinit const TileKernel kTilePackedAvxVnniQ4_K{};
constinit const TileKernel kTilePackedAvxVnniQ5_K{};
constinit const TileKernel kTilePackedAvxVnniQ6_K{};
constinit const TileKernel kTilePackedAvxVnniIQ4_XS{};
constinit const TileKernel kTilePackedAvxVnniMXFP4{};
}  // namespace hearth::kernels

#endif

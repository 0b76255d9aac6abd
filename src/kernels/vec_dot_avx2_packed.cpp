// AVX2 tiles for packed weights (packed.h): packed_tiles.inc with vpdpbusd and vpdpwssd emulated, for CPUs without
// AVX-VNNI. The packed layout is the same (one packing serves both levels); what differs is the product step:
//   dpbusd: vpmaddubsw (u·s pairs to int16) then vpmaddwd by 1 (pairs to int32) then vpaddd. Exact while a pair
//           of products fits an int16: u ≤ 128 and |s| ≤ 127 give at most 2·128·127 = 32,512. Q4_0, Q3_K to Q6_K
//           store u ≤ 63, MXFP4's looked-up values u ≤ 24.
//   wide (Q8_0 and IQ4_XS, u = w + 128 up to 255): w = u ^ 0x80 back to the signed weight, then |w| (at most 128,
//           once per weight vector) times the activation with w's sign (vpsignb, per token): Σ w·s exactly, with
//           no offset, so those tiles start at 0 instead of the activation's −128·Σx correction.
// The integer sums equal the VNNI tiles' exactly, and the fp32 steps are the same, so every output is bitwise
// vec_dot_reference's, as at every level.

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

#define HEARTH_PACKED __attribute__((target("avx2,fma,f16c")))

namespace hearth::kernels {
namespace {

// The accumulator of an emulated vpdpbusd, kept a chain. Integer additions reassociate freely, and GCC turns a
// tile's chains of vpaddd into trees of partial sums, one register each: for Q8_0's 4 tokens × 8 column groups
// that spilled about twenty of them to the stack per block. The empty asm makes each sum an opaque value, so the
// additions stay in the order written (the sums are exact either way; this is only about registers).
HEARTH_PACKED inline __m256i chained(__m256i acc) {
  asm("" : "+x"(acc));
  return acc;
}

// acc + Σ of each lane's four u·s, exact for u ≤ 128 (the sign trick's |w|).
HEARTH_PACKED inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
  return chained(_mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))));
}

// Both products in int16 before one vpmaddwd: with u ≤ 64 four products are at most 4·64·127 = 32,512.
HEARTH_PACKED inline __m256i dpbusd_pair(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
  return chained(_mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))));
}

HEARTH_PACKED inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return chained(_mm256_add_epi32(acc, _mm256_madd_epi16(a, b)));
}

struct Wide {
  __m256i magnitude;  // |w| as unsigned bytes (−128 gives 128)
  __m256i sign;       // w itself: vpsignb takes its sign
};

HEARTH_PACKED inline Wide wide_weights(__m256i u) {
  const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
  return {_mm256_abs_epi8(w), w};
}

HEARTH_PACKED inline __m256i dpbusd_wide(__m256i acc, Wide w, __m256i s) {
  return dpbusd(acc, w.magnitude, _mm256_sign_epi8(s, w.sign));
}

inline constexpr bool kWideOffsetInSum = false;

// AVX2 multiplies only through vpmaddubsw/vpmaddwd (one port on some CPUs), so the K-quant tiles
// keep sub-block sums in int16 and scale them with the vpmaddwd that widens them (packed_tiles_q8_k_act.inc).
inline constexpr bool kInt16Sums = true;

#include "kernels/packed_tiles.inc"

}  // namespace

constinit const TileKernel kTilePackedAvx2Q8_0 = kPackedTileQ8_0;
constinit const TileKernel kTilePackedAvx2Q4_0 = kPackedTileQ4_0;
constinit const TileKernel kTilePackedAvx2Q3_K = kPackedTileQ3_K;
constinit const TileKernel kTilePackedAvx2Q4_K = kPackedTileQ4_K;
constinit const TileKernel kTilePackedAvx2Q5_K = kPackedTileQ5_K;
constinit const TileKernel kTilePackedAvx2Q6_K = kPackedTileQ6_K;
constinit const TileKernel kTilePackedAvx2IQ4_XS = kPackedTileIQ4_XS;
constinit const TileKernel kTilePackedAvx2MXFP4 = kPackedTileMXFP4;

}  // namespace hearth::kernels

#else

namespace hearth::kernels {
constinit const TileKernel kTilePackedAvx2Q8_0{};
constinit const TileKernel kTilePackedAvx2Q4_0{};
constinit const TileKernel kTilePackedAvx2Q3_K{};
constinit const TileKernel kTilePackedAvx2Q4_K{};
constinit const TileKernel kTilePackedAvx2Q5_K{};
constinit const TileKernel kTilePackedAvx2Q6_K{};
constinit const TileKernel kTilePackedAvx2IQ4_XS{};
constinit const TileKernel kTilePackedAvx2MXFP4{};
}  // namespace hearth::kernels

#endif

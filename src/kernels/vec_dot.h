#pragma once
// Internal interface between the matmul driver and the per-ISA dot-product kernels.
//
// A tile kernel computes a small block of outputs, n_rows (<= max_rows) weight rows × n_tokens (<= max_tokens)
// activation rows. Every output is one complete dot product over n_cols whose arithmetic does not depend on the
// tile shape: the register-blocked 4×3 instance and the 1×1 instance give bitwise equal results. This is what
// makes matmul batch-invariant.

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_isa.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace hearth::kernels {

struct TileArgs {
  const uint8_t* w = nullptr;  // first weight row; row i at w + i * w_stride
  size_t w_stride = 0;
  const uint8_t* x = nullptr;  // first activation row (in the activation type); row t at x + t * x_stride
  size_t x_stride = 0;
  float* y = nullptr;  // output for (row i, token t) at y[t * y_stride + i]
  size_t y_stride = 0;
  int64_t n_cols = 0;
  int n_rows = 0;
  int n_tokens = 0;
  // Packed tiles only (packed.h): w is the first row's group, and per activation row the int32s the packed type
  // reads beside the activation (packed_activation_corrections), row t at x_sums + t * x_sums_stride.
  const int32_t* x_sums = nullptr;
  size_t x_sums_stride = 0;
};

using TileFn = void (*)(const TileArgs& args);

struct TileKernel {
  TileFn fn = nullptr;
  int max_rows = 1;
  int max_tokens = 1;
  // Rows per call when a call covers more than one token; 0: max_rows. A multiple of the weight unit's rows that
  // divides max_rows (the packed tiles: one group for prefill, where a second group's weights would crowd the
  // activations out of L1, two for decode, where two memory streams per thread read faster).
  int max_rows_many_tokens = 0;
};

// Scalar reference dot product of one weight row with one activation row (already in the activation type).
float vec_dot_reference(DType weight_type, const void* w, const void* x, int64_t n_cols);

// The scalar reference dot products of the types in vec_dot_ref_more.cpp (n_cols elements).
float dot_q4_1_reference(const BlockQ4_1* w, const BlockQ8_0* x, int64_t n_cols);
float dot_q5_0_reference(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n_cols);
float dot_q5_1_reference(const BlockQ5_1* w, const BlockQ8_0* x, int64_t n_cols);
float dot_iq4_nl_reference(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n_cols);
float dot_q2_k_reference(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n_cols);
float dot_q3_k_reference(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n_cols);
float dot_q5_k_reference(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n_cols);
float dot_iq4_xs_reference(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n_cols);

// The tile kernel for a weight type at an ISA level; fn == nullptr when that level has none for the type.
TileKernel scalar_tile_kernel(DType weight_type);
TileKernel avx2_float_tile_kernel(DType weight_type);        // F32, F16, BF16
TileKernel avx2_q8_tile_kernel(DType weight_type);           // Q8_0, Q4_0, and the four below
TileKernel avx2_q8_more_tile_kernel(DType weight_type);      // Q4_1, Q5_0, Q5_1, IQ4_NL
TileKernel avx2_kquant_tile_kernel(DType weight_type);       // Q4_K, Q5_K, Q6_K, and the three below
TileKernel avx2_kquant_more_tile_kernel(DType weight_type);  // Q2_K, Q3_K, IQ4_XS

// Packed layouts (packed.h): quant bytes per 32-column block of a group of 8 rows, and for the K-quants all bytes
// (scales and quants) per 256-column super-block of a group.
inline constexpr size_t kPackedQ8_0QuantBytes = 256;
inline constexpr size_t kPackedQ4_0QuantBytes = 128;
inline constexpr size_t kPackedScaleBytes = 16;  // a Q8_0 or Q4_0 block's 8 fp16 row scales

// Where block b of a packed Q8_0 or Q4_0 group (n_blocks blocks of quant_bytes) keeps its quants and its scales:
// blocks go in pairs, [quants b][quants b + 1][scales b][scales b + 1], and an odd last block alone, [quants][scales]
// (packed.h). Each block's bytes still average quant_bytes + kPackedScaleBytes, so the block's share of the group's
// stream starts at b · (quant_bytes + kPackedScaleBytes).
struct PackedBlockAt {
  size_t quants = 0;
  size_t scales = 0;
};
inline PackedBlockAt packed_block_at(int64_t n_blocks, int64_t b, size_t quant_bytes) {
  const int64_t first = b & ~int64_t{1};
  const size_t base = static_cast<size_t>(first) * (quant_bytes + kPackedScaleBytes);
  const size_t in_pair = n_blocks - first >= 2 ? 2 : 1;
  const size_t k = static_cast<size_t>(b - first);
  return {base + k * quant_bytes, base + in_pair * quant_bytes + k * kPackedScaleBytes};
}
inline constexpr size_t kPackedQ3_KSuperBytes = 928;
inline constexpr size_t kPackedQ4_KSuperBytes = 1184;
inline constexpr size_t kPackedQ5_KSuperBytes = 1440;
inline constexpr size_t kPackedQ6_KSuperBytes = 1696;
inline constexpr size_t kPackedIQ4_XSSuperBytes = 1120;

// The tile for packed weights of this type (8 rows × up to 4 tokens), AVX-VNNI (vec_dot_avxvnni_packed.cpp) or AVX2
// (vec_dot_avx2_packed.cpp, the same source with the products emulated); fn == nullptr when there is none or the
// build is not x86-64. Both are bitwise the scalar reference (vec_dot_reference) for every output.
TileKernel vnni_packed_tile_kernel(DType weight_type);
// The same with AVX512-VNNI (vec_dot_avx512vnni_packed.cpp): 16 rows × up to 8 tokens on 512-bit vectors where the tile
// is two full groups and at least 4 tokens, the 8-row tiles with EVEX vpdpbusd otherwise.
TileKernel avx512_packed_tile_kernel(DType weight_type);
TileKernel avx2_packed_tile_kernel(DType weight_type);

// How many int32s packed_activation_corrections writes for one activation row of n_cols.
int64_t packed_correction_count(DType weight_type, int64_t n_cols);

// For one activation row (in matmul_activation_type(weight_type)), the int32s the packed tile reads beside it:
//   Q8_0, Q4_0: per block two: the int32 that cancels the packed weights' unsigned offset, -128·Σx for Q8_0 weights
//               and -8·Σx for Q4_0 weights, then the block's scale d as fp32 bits;
//   Q4_K, Q5_K: per super-block 4 int16 pairs (bs[2k], bs[2k+1]) as int32 (low half first), bs[s] = Σx of the
//   32-element
//         sub-block s, the operand of the per-row Σ m[s]·bs[s];
//   Q6_K: per super-block 16 values -32·Σx of each 16 elements, cancelling the 6-bit weights' offset of 32;
//   Q3_K: per super-block 16 values -4·Σx of each 16 elements, cancelling the offset of 4 that makes q unsigned;
//   IQ4_XS: per super-block 8 values -128·Σx of each 32 elements, cancelling the offset of 128 on the codebook.
void packed_activation_corrections(DType weight_type, const uint8_t* x, int64_t n_cols, int32_t* out);

// Converts one fp32 row to the activation type of `weight_type` (see matmul_activation_type).
void quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols);

// The AVX2 twin of quantize_activation_row for the Q8_0 and Q8_K activation types: byte for byte the same blocks.
// Returns false (writing nothing) for the other types or without x86-64; the caller then uses the scalar one.
// Requires an AVX2 CPU.
bool avx2_quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols);

}  // namespace hearth::kernels

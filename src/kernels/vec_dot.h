#pragma once
// Internal interface between the matmul driver and the per-ISA dot-product kernels: everything the weight-type table
// (weight_types.h) points at is declared here.
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

namespace hearth {
struct MatrixView;  // kernels/matmul.h
}  // namespace hearth

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
  // reads beside the activation (its packed_corrections_*), row t at x_sums + t * x_sums_stride.
  const int32_t* x_sums = nullptr;
  size_t x_sums_stride = 0;
};

using TileFn = void (*)(const TileArgs& args);

// Tiles are objects with constant initialization (constinit), so the weight-type table (weight_types.cpp) can point at
// them from its own constant rows.
struct TileKernel {
  TileFn fn = nullptr;
  int max_rows = 1;
  int max_tokens = 1;
  // Rows per call when a call covers more than one token; 0: max_rows. A multiple of the weight unit's rows that
  // divides max_rows (the packed tiles: one group for prefill, where a second group's weights would crowd the
  // activations out of L1, two for decode, where two memory streams per thread read faster).
  int max_rows_many_tokens = 0;
};

// The scalar reference dot products (vec_dot_ref.cpp): one weight row times one activation row in the weight type's
// activation type (weight_types.h), n_cols elements. These are the twins: they define IsaLevel::kScalar's results,
// and every vector tile is tested against them. Each integer part is exact; the fp32 steps are written above each.
float vec_dot_f32_reference(const float* w, const float* x, int64_t n_cols);
float vec_dot_f16_reference(const uint16_t* w, const float* x, int64_t n_cols);
float vec_dot_bf16_reference(const uint16_t* w, const float* x, int64_t n_cols);
float vec_dot_q8_0_reference(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_q4_0_reference(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_q4_1_reference(const BlockQ4_1* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_q5_0_reference(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_q5_1_reference(const BlockQ5_1* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_iq4_nl_reference(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_mxfp4_reference(const BlockMXFP4* w, const BlockQ8_0* x, int64_t n_cols);
float vec_dot_q2_k_reference(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n_cols);
float vec_dot_q3_k_reference(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n_cols);
float vec_dot_q4_k_reference(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n_cols);
float vec_dot_q5_k_reference(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n_cols);
float vec_dot_q6_k_reference(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n_cols);
float vec_dot_iq4_xs_reference(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n_cols);

// The reference dot product of the weight type's row (weight_types.h); aborts for a type matmul does not compute.
float vec_dot_reference(DType weight_type, const void* w, const void* x, int64_t n_cols);

// The AVX2 tiles on the GGUF layout, one per weight type; fn == nullptr where the build is not x86-64.
// fp32 activations (vec_dot_avx2_f32_act.cpp):
extern const TileKernel kTileAvx2F32;
extern const TileKernel kTileAvx2F16;
extern const TileKernel kTileAvx2BF16;
// Q8_0 activations, block sums in fp32 lanes (vec_dot_avx2_q8_0_act_lanes.cpp):
extern const TileKernel kTileAvx2Q8_0;
extern const TileKernel kTileAvx2Q4_0;
// Q8_0 activations, block terms added in the twin's order (vec_dot_avx2_q8_0_act_in_order.cpp):
extern const TileKernel kTileAvx2Q4_1;
extern const TileKernel kTileAvx2Q5_0;
extern const TileKernel kTileAvx2Q5_1;
extern const TileKernel kTileAvx2IQ4_NL;
extern const TileKernel kTileAvx2MXFP4;
// Q8_K activations (vec_dot_avx2_q8_k_act.cpp):
extern const TileKernel kTileAvx2Q2_K;
extern const TileKernel kTileAvx2Q3_K;
extern const TileKernel kTileAvx2Q4_K;
extern const TileKernel kTileAvx2Q5_K;
extern const TileKernel kTileAvx2Q6_K;
extern const TileKernel kTileAvx2IQ4_XS;

// Packed layouts (packed.h): quant bytes per 32-column block of a group of 8 rows, and for the K-quants all bytes
// (scales and quants) per 256-column super-block of a group.
inline constexpr size_t kPackedQ8_0QuantBytes = 256;
inline constexpr size_t kPackedQ4_0QuantBytes = 128;
inline constexpr size_t kPackedScaleBytes = 16;  // a Q8_0 or Q4_0 block's 8 fp16 row scales (MXFP4's: 8 bf16)
// MXFP4 is packed as Q4_0 is (its 32 codes of a row in 16 bytes, its scale in 2), so it takes Q4_0's block pairs.
inline constexpr size_t kPackedMXFP4QuantBytes = kPackedQ4_0QuantBytes;
// The offset that makes an MXFP4 table value (kMxfp4Values, -12 to 12) an unsigned vpdpbusd operand (0 to 24).
inline constexpr int32_t kPackedMXFP4Offset = 12;

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

// Packs one group of kPackRows rows of w, starting at row0, into `group` (packed.cpp; layouts in packed.h).
void pack_group_q8_0(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_q4_0(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_q3_k(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_q4_k(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_q5_k(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_q6_k(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_iq4_xs(const MatrixView& w, int64_t row0, uint8_t* group);
void pack_group_mxfp4(const MatrixView& w, int64_t row0, uint8_t* group);

// For one activation row x of n_cols (Q8_0 or Q8_K blocks), the int32s the packed tile reads beside it (packed.cpp):
//   Q8_0, Q4_0: per block two: the int32 that cancels the packed weights' unsigned offset, -128·Σx for Q8_0 weights
//               and -8·Σx for Q4_0 weights, then the block's scale d as fp32 bits;
//   Q4_K, Q5_K: per super-block 4 int16 pairs (bs[2k], bs[2k+1]) as int32 (low half first), bs[s] = Σx of the
//               32-element sub-block s, the operand of the per-row Σ m[s]·bs[s];
//   Q6_K: per super-block 16 values -32·Σx of each 16 elements, cancelling the 6-bit weights' offset of 32;
//   Q3_K: per super-block 16 values -4·Σx of each 16 elements, cancelling the offset of 4 that makes q unsigned;
//   IQ4_XS: per super-block 8 values -128·Σx of each 32 elements, cancelling the offset of 128 on the codebook;
//   MXFP4: as Q4_0, per block -12·Σx (kPackedMXFP4Offset on the table values) and the block's scale as fp32 bits.
void packed_corrections_q8_0(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_q4_0(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_q4_k_q5_k(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_q6_k(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_q3_k(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_iq4_xs(const uint8_t* x, int64_t n_cols, int32_t* out);
void packed_corrections_mxfp4(const uint8_t* x, int64_t n_cols, int32_t* out);

// How many int32s the packed corrections of this type write for one activation row of n_cols (0 without a layout).
int64_t packed_correction_count(DType weight_type, int64_t n_cols);

// The tiles for packed weights, per type and level; fn == nullptr where the build is not x86-64. Every output is
// bitwise the twin's at every level.
// IsaLevel::kAvx2, 8 rows × up to 4 tokens, vpdpbusd emulated (vec_dot_avx2_packed.cpp):
extern const TileKernel kTilePackedAvx2Q8_0;
extern const TileKernel kTilePackedAvx2Q4_0;
extern const TileKernel kTilePackedAvx2Q3_K;
extern const TileKernel kTilePackedAvx2Q4_K;
extern const TileKernel kTilePackedAvx2Q5_K;
extern const TileKernel kTilePackedAvx2Q6_K;
extern const TileKernel kTilePackedAvx2IQ4_XS;
extern const TileKernel kTilePackedAvx2MXFP4;
// IsaLevel::kAvxVnni, the same source with vpdpbusd itself (vec_dot_avxvnni_packed.cpp):
extern const TileKernel kTilePackedAvxVnniQ8_0;
extern const TileKernel kTilePackedAvxVnniQ4_0;
extern const TileKernel kTilePackedAvxVnniQ3_K;
extern const TileKernel kTilePackedAvxVnniQ4_K;
extern const TileKernel kTilePackedAvxVnniQ5_K;
extern const TileKernel kTilePackedAvxVnniQ6_K;
extern const TileKernel kTilePackedAvxVnniIQ4_XS;
extern const TileKernel kTilePackedAvxVnniMXFP4;
// IsaLevel::kAvx512Vnni, 16 rows × up to 8 tokens on 512-bit vectors where the tile is two full groups, the 8-row
// tiles with EVEX vpdpbusd otherwise (vec_dot_avx512vnni_packed.cpp):
extern const TileKernel kTilePackedAvx512VnniQ8_0;
extern const TileKernel kTilePackedAvx512VnniQ4_0;
extern const TileKernel kTilePackedAvx512VnniQ3_K;
extern const TileKernel kTilePackedAvx512VnniQ4_K;
extern const TileKernel kTilePackedAvx512VnniQ5_K;
extern const TileKernel kTilePackedAvx512VnniQ6_K;
extern const TileKernel kTilePackedAvx512VnniIQ4_XS;
extern const TileKernel kTilePackedAvx512VnniMXFP4;

// Converts one fp32 row to the activation type of `weight_type` (weight_types.h): the reference conversion.
void quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols);

// The AVX2 conversions to Q8_0 and Q8_K (quantize_avx2.cpp): byte for byte quantize_row_q8_0 and quantize_row_q8_k.
// Require an AVX2 CPU; only x86-64 builds have them.
void quantize_row_q8_0_avx2(const float* src, uint8_t* dst, int64_t n_cols);
void quantize_row_q8_k_avx2(const float* src, uint8_t* dst, int64_t n_cols);

// quantize_activation_row with AVX2 for the Q8_0 and Q8_K activation types: byte for byte the same blocks.
// Returns false (writing nothing) for the other types or without x86-64; the caller then uses the scalar one.
// Requires an AVX2 CPU.
bool avx2_quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols);

}  // namespace hearth::kernels

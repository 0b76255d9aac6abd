#pragma once
// The weight types matmul computes, one row each (weight_types.cpp): everything the kernels need to know about a
// type is in its row, and the matmul driver (matmul.cpp) and the packing (packed.cpp) read the row instead of
// switching on the type. docs/adding-a-weight-type.md says how to add one.
//
//   type        the weight type (a DType with dtype_info(type).compute_supported; tests/kernels/weight_types_test.cpp
//               checks that each such type has a complete row, and nothing else has one);
//   activation  what a token row is converted to before the tiles read it: F32 (copied), Q8_0 or Q8_K;
//   scalar      the reference dot product (the twin every other kernel is tested against) and the 1×1 tile that runs
//               it for every output: what IsaLevel::kScalar computes;
//   avx2        the tile on the GGUF layout for IsaLevel::kAvx2 and above, and whether its results are bitwise the
//               twin's or its own fp32 lanes';
//   packed      optionally, a layout the weights are repacked into at load (packed.h), with its tiles per ISA level.
//
// matmul looks a row up once per call (once per matrix of a group) and calls its conversion and corrections once per
// token row; the tiles themselves and their inner loops never go through the table.

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu_isa.h"
#include "kernels/vec_dot.h"
#include "tensor/dtype.h"

namespace hearth {
struct MatrixView;  // kernels/matmul.h
}  // namespace hearth

namespace hearth::kernels {

// Converts one fp32 row of n_cols (a multiple of the activation type's block) to the activation type.
using QuantizeRowFn = void (*)(const float* src, uint8_t* dst, int64_t n_cols);

// One weight row (w, in the weight type) times one activation row (x, in its activation type), n_cols elements.
using ReferenceDotFn = float (*)(const void* w, const void* x, int64_t n_cols);

// Writes the packed group of rows [row0, row0 + kPackRows) of w into `group` (packed_group_bytes, zeroed); rows
// past w.n_rows become zero weights.
using PackGroupFn = void (*)(const MatrixView& w, int64_t row0, uint8_t* group);

// For one activation row of n_cols, the int32s a packed tile reads beside it (vec_dot.h, packed_corrections_*).
using CorrectionsFn = void (*)(const uint8_t* x, int64_t n_cols, int32_t* out);

struct ActivationType {
  DType type = DType::F32;                // F32, Q8_0 or Q8_K
  QuantizeRowFn quantize = nullptr;       // the reference conversion (F32: a copy)
  QuantizeRowFn quantize_avx2 = nullptr;  // byte for byte `quantize`, with AVX2; nullptr: none (F32, not x86-64)
};

struct ScalarKernels {
  ReferenceDotFn dot = nullptr;         // the twin
  const TileKernel* tile = nullptr;     // `dot` per output, 1 row × 1 token
};

// How a vector tile's outputs relate to the twin's.
enum class Reduction {
  kAsTwin,  // the same exact integer sums and the same fp32 expression in the same order: bitwise the twin
  kLanes,   // fp32 partial sums in vector lanes, added in a fixed order of their own: close to the twin, not equal
};

struct Avx2Kernels {
  const TileKernel* tile = nullptr;  // the GGUF layout; tile->fn == nullptr where the build is not x86-64
  Reduction reduction = Reduction::kAsTwin;
};

struct PackedLayout {
  int64_t unit_cols = 0;             // columns per unit: a 32-column block or a 256-column super-block
  size_t unit_bytes = 0;             // bytes of one unit of a group of kPackRows rows; two units a multiple of 32
  int64_t corrections_per_unit = 0;  // int32s `corrections` writes per unit of an activation row
  PackGroupFn pack_group = nullptr;
  CorrectionsFn corrections = nullptr;
  // Tiles per level (tile->fn == nullptr where the build is not x86-64); every output bitwise the twin's.
  const TileKernel* avx2_tile = nullptr;
  const TileKernel* avx_vnni_tile = nullptr;
  const TileKernel* avx512_vnni_tile = nullptr;
};

struct WeightType {
  DType type = DType::F32;
  const ActivationType* activation = nullptr;
  ScalarKernels scalar;
  Avx2Kernels avx2;
  const PackedLayout* packed = nullptr;  // nullptr: the type has no packed layout
};

// Every row, one per computable type.
std::span<const WeightType> weight_types();

// The row of `type`; nullptr when matmul does not compute it.
const WeightType* find_weight_type(DType type);

// The row of `type`; aborts, naming the type, when there is none.
const WeightType& weight_type(DType type);

// The tile `level` runs on the GGUF layout: the AVX2 tile from kAvx2 up (where the build has it), else the scalar one.
const TileKernel& gguf_tile(const WeightType& row, IsaLevel level);

// The packed tile `level` runs (a level of kAvx2 or above): the AVX512-VNNI, AVX-VNNI or AVX2 one.
const TileKernel& packed_tile(const PackedLayout& layout, IsaLevel level);

}  // namespace hearth::kernels

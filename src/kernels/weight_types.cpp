// The weight-type table (weight_types.h): one row per type matmul computes.

#include "kernels/weight_types.h"

#include <array>
#include <cstring>

#include "tensor/quant.h"
#include "util/result.h"

namespace hearth::kernels {
namespace {

// The activation types.

void copy_f32_row(const float* src, uint8_t* dst, int64_t n_cols) {
  std::memcpy(dst, src, static_cast<size_t>(n_cols) * sizeof(float));
}

void quantize_q8_0_row(const float* src, uint8_t* dst, int64_t n_cols) {
  quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0*>(dst), n_cols);
}

void quantize_q8_k_row(const float* src, uint8_t* dst, int64_t n_cols) {
  quantize_row_q8_k(src, reinterpret_cast<BlockQ8_K*>(dst), n_cols);
}

#if defined(__x86_64__)
constexpr QuantizeRowFn kQuantizeQ8_0Avx2 = quantize_row_q8_0_avx2;
constexpr QuantizeRowFn kQuantizeQ8_KAvx2 = quantize_row_q8_k_avx2;
#else
constexpr QuantizeRowFn kQuantizeQ8_0Avx2 = nullptr;
constexpr QuantizeRowFn kQuantizeQ8_KAvx2 = nullptr;
#endif

constexpr ActivationType kActivationF32{DType::F32, copy_f32_row, nullptr};
constexpr ActivationType kActivationQ8_0{DType::Q8_0, quantize_q8_0_row, kQuantizeQ8_0Avx2};
constexpr ActivationType kActivationQ8_K{DType::Q8_K, quantize_q8_k_row, kQuantizeQ8_KAvx2};

// Twin<dot>: a typed reference dot product (vec_dot.h) behind the row's untyped signature, and the scalar tile that
// runs it for each output.
template <auto kDot>
struct Twin;

template <class W, class X, float (*kDot)(const W*, const X*, int64_t)>
struct Twin<kDot> {
  static float dot(const void* w, const void* x, int64_t n_cols) {
    return kDot(static_cast<const W*>(w), static_cast<const X*>(x), n_cols);
  }
  static void tile(const TileArgs& a) {
    for (int t = 0; t < a.n_tokens; ++t) {
      for (int r = 0; r < a.n_rows; ++r) {
        a.y[t * a.y_stride + r] = dot(a.w + r * a.w_stride, a.x + t * a.x_stride, a.n_cols);
      }
    }
  }
  static constexpr TileKernel kTile{&tile, 1, 1};
};

template <auto kDot>
constexpr ScalarKernels kTwin{&Twin<kDot>::dot, &Twin<kDot>::kTile};

// The packed layouts (packed.h). A Q8_0 or Q4_0 unit is one 32-column block of 8 rows: its quants and 8 fp16 scales.
constexpr PackedLayout kPackedQ8_0{kQK8_0,
                                   kPackedQ8_0QuantBytes + kPackedScaleBytes,
                                   2,
                                   pack_group_q8_0,
                                   packed_corrections_q8_0,
                                   &kTilePackedAvx2Q8_0,
                                   &kTilePackedAvxVnniQ8_0,
                                   &kTilePackedAvx512VnniQ8_0};
constexpr PackedLayout kPackedQ4_0{kQK4_0,
                                   kPackedQ4_0QuantBytes + kPackedScaleBytes,
                                   2,
                                   pack_group_q4_0,
                                   packed_corrections_q4_0,
                                   &kTilePackedAvx2Q4_0,
                                   &kTilePackedAvxVnniQ4_0,
                                   &kTilePackedAvx512VnniQ4_0};
constexpr PackedLayout kPackedQ3_K{kQK_K,
                                   kPackedQ3_KSuperBytes,
                                   16,
                                   pack_group_q3_k,
                                   packed_corrections_q3_k,
                                   &kTilePackedAvx2Q3_K,
                                   &kTilePackedAvxVnniQ3_K,
                                   &kTilePackedAvx512VnniQ3_K};
constexpr PackedLayout kPackedQ4_K{kQK_K,
                                   kPackedQ4_KSuperBytes,
                                   4,
                                   pack_group_q4_k,
                                   packed_corrections_q4_k_q5_k,
                                   &kTilePackedAvx2Q4_K,
                                   &kTilePackedAvxVnniQ4_K,
                                   &kTilePackedAvx512VnniQ4_K};
constexpr PackedLayout kPackedQ5_K{kQK_K,
                                   kPackedQ5_KSuperBytes,
                                   4,
                                   pack_group_q5_k,
                                   packed_corrections_q4_k_q5_k,
                                   &kTilePackedAvx2Q5_K,
                                   &kTilePackedAvxVnniQ5_K,
                                   &kTilePackedAvx512VnniQ5_K};
constexpr PackedLayout kPackedQ6_K{kQK_K,
                                   kPackedQ6_KSuperBytes,
                                   16,
                                   pack_group_q6_k,
                                   packed_corrections_q6_k,
                                   &kTilePackedAvx2Q6_K,
                                   &kTilePackedAvxVnniQ6_K,
                                   &kTilePackedAvx512VnniQ6_K};
constexpr PackedLayout kPackedIQ4_XS{kQK_K,
                                     kPackedIQ4_XSSuperBytes,
                                     8,
                                     pack_group_iq4_xs,
                                     packed_corrections_iq4_xs,
                                     &kTilePackedAvx2IQ4_XS,
                                     &kTilePackedAvxVnniIQ4_XS,
                                     &kTilePackedAvx512VnniIQ4_XS};

// MXFP4 takes Q4_0's layout, its codes looked up in the tile and its E8M0 scales as bf16 (packed.h).
constexpr PackedLayout kPackedMXFP4{kQK8_0,
                                    kPackedMXFP4QuantBytes + kPackedScaleBytes,
                                    2,
                                    pack_group_mxfp4,
                                    packed_corrections_mxfp4,
                                    &kTilePackedAvx2MXFP4,
                                    &kTilePackedAvxVnniMXFP4,
                                    &kTilePackedAvx512VnniMXFP4};

constexpr Reduction kAsTwin = Reduction::kAsTwin;
constexpr Reduction kLanes = Reduction::kLanes;

// clang-format off
constexpr WeightType kRows[] = {
    // type         activation        scalar: the twin                 AVX2 tile                    packed
    {DType::F32,    &kActivationF32,  kTwin<vec_dot_f32_reference>,    {&kTileAvx2F32,    kLanes},  nullptr},
    {DType::F16,    &kActivationF32,  kTwin<vec_dot_f16_reference>,    {&kTileAvx2F16,    kLanes},  nullptr},
    {DType::BF16,   &kActivationF32,  kTwin<vec_dot_bf16_reference>,   {&kTileAvx2BF16,   kLanes},  nullptr},
    {DType::Q8_0,   &kActivationQ8_0, kTwin<vec_dot_q8_0_reference>,   {&kTileAvx2Q8_0,   kLanes},  &kPackedQ8_0},
    {DType::Q4_0,   &kActivationQ8_0, kTwin<vec_dot_q4_0_reference>,   {&kTileAvx2Q4_0,   kLanes},  &kPackedQ4_0},
    {DType::Q4_1,   &kActivationQ8_0, kTwin<vec_dot_q4_1_reference>,   {&kTileAvx2Q4_1,   kAsTwin}, nullptr},
    {DType::Q5_0,   &kActivationQ8_0, kTwin<vec_dot_q5_0_reference>,   {&kTileAvx2Q5_0,   kAsTwin}, nullptr},
    {DType::Q5_1,   &kActivationQ8_0, kTwin<vec_dot_q5_1_reference>,   {&kTileAvx2Q5_1,   kAsTwin}, nullptr},
    {DType::IQ4_NL, &kActivationQ8_0, kTwin<vec_dot_iq4_nl_reference>, {&kTileAvx2IQ4_NL, kAsTwin}, nullptr},
    {DType::MXFP4,  &kActivationQ8_0, kTwin<vec_dot_mxfp4_reference>,  {&kTileAvx2MXFP4,  kAsTwin}, &kPackedMXFP4},
    {DType::Q2_K,   &kActivationQ8_K, kTwin<vec_dot_q2_k_reference>,   {&kTileAvx2Q2_K,   kAsTwin}, nullptr},
    {DType::Q3_K,   &kActivationQ8_K, kTwin<vec_dot_q3_k_reference>,   {&kTileAvx2Q3_K,   kAsTwin}, &kPackedQ3_K},
    {DType::Q4_K,   &kActivationQ8_K, kTwin<vec_dot_q4_k_reference>,   {&kTileAvx2Q4_K,   kAsTwin}, &kPackedQ4_K},
    {DType::Q5_K,   &kActivationQ8_K, kTwin<vec_dot_q5_k_reference>,   {&kTileAvx2Q5_K,   kAsTwin}, &kPackedQ5_K},
    {DType::Q6_K,   &kActivationQ8_K, kTwin<vec_dot_q6_k_reference>,   {&kTileAvx2Q6_K,   kAsTwin}, &kPackedQ6_K},
    {DType::IQ4_XS, &kActivationQ8_K, kTwin<vec_dot_iq4_xs_reference>, {&kTileAvx2IQ4_XS, kAsTwin}, &kPackedIQ4_XS},
};
// clang-format on

// kRowIndex[t]: the index in kRows of the row of the type numbered t, or -1. A second row of one type (or a type
// numbered past the index) calls row_index_error in a constant expression, which does not compile.
constexpr size_t kMaxTypeNumber = 64;
inline void row_index_error() {}
constexpr std::array<int8_t, kMaxTypeNumber> make_row_index() {
  std::array<int8_t, kMaxTypeNumber> index{};
  for (int8_t& i : index) i = -1;
  for (size_t r = 0; r < std::size(kRows); ++r) {
    const auto t = static_cast<size_t>(kRows[r].type);
    if (t >= kMaxTypeNumber || index[t] != -1) row_index_error();
    index[t] = static_cast<int8_t>(r);
  }
  return index;
}
constexpr std::array<int8_t, kMaxTypeNumber> kRowIndex = make_row_index();

}  // namespace

std::span<const WeightType> weight_types() {
  return kRows;
}

const WeightType* find_weight_type(DType type) {
  const auto t = static_cast<size_t>(type);
  return t < kMaxTypeNumber && kRowIndex[t] >= 0 ? &kRows[kRowIndex[t]] : nullptr;
}

const WeightType& weight_type(DType type) {
  const WeightType* row = find_weight_type(type);
  HEARTH_CHECK(row != nullptr, "matmul: unsupported weight type {}", dtype_name(type));
  return *row;
}

const TileKernel& gguf_tile(const WeightType& row, IsaLevel level) {
  if (static_cast<int>(level) >= static_cast<int>(IsaLevel::kAvx2) && row.avx2.tile->fn != nullptr) {
    return *row.avx2.tile;
  }
  return *row.scalar.tile;
}

const TileKernel& packed_tile(const PackedLayout& layout, IsaLevel level) {
  switch (level) {
    case IsaLevel::kAvx512Vnni:
      return *layout.avx512_vnni_tile;
    case IsaLevel::kAvxVnni:
      return *layout.avx_vnni_tile;
    case IsaLevel::kScalar:
    case IsaLevel::kAvx2:
      return *layout.avx2_tile;
  }
  return *layout.avx2_tile;
}

float vec_dot_reference(DType weight_type, const void* w, const void* x, int64_t n_cols) {
  return kernels::weight_type(weight_type).scalar.dot(w, x, n_cols);
}

void quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols) {
  kernels::weight_type(weight_type).activation->quantize(src, dst, n_cols);
}

bool avx2_quantize_activation_row(DType weight_type, const float* src, uint8_t* dst, int64_t n_cols) {
  const QuantizeRowFn quantize = kernels::weight_type(weight_type).activation->quantize_avx2;
  if (quantize == nullptr) return false;
  quantize(src, dst, n_cols);
  return true;
}

}  // namespace hearth::kernels

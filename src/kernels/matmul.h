#pragma once
// matmul: y = x · Wᵀ for a weight matrix in any compute-supported dtype (dtype_info(type).compute_supported: the
// types with a row in the weight-type table, weight_types.h).
//
// Determinism contract: y[t][r] is one dot product of weight row r with token row t, always reduced in the same
// order over the columns. It is bitwise identical whatever n_tokens is, whichever other tokens share the batch,
// and however many threads run, so a prefix-cache hit reproduces a miss exactly. Threads split rows (or token
// tiles), never the reduction. Results may differ in the last bits between ISA levels (see cpu_isa.h).
//
// Activations: each token row is converted to the weight type's activation type (its table row): Q8_0 for the
// 32-element blocks (Q8_0, Q4_0, IQ4_NL, MXFP4, ...), Q8_K for the 256-element K-quants and IQ4_XS, fp32 for
// F32/F16/BF16. That conversion depends only on the row itself.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace hearth {

// A row-major weight matrix [n_rows, n_cols] (GGML ne0 = n_cols). Row r starts at data + r * row_stride and holds
// row_bytes(type, n_cols) bytes. n_cols must be a multiple of the type's block size.
struct PackedMatrix;  // kernels/packed.h

// `packed`, when set, is the same rows repacked for the packed tiles (pack_matrix); matmul reads it at
// IsaLevel::kAvx2 and above (AVX2 or AVX-VNNI tiles) and `data` at kScalar.
struct MatrixView {
  DType type = DType::F32;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;
  const PackedMatrix* packed = nullptr;
};

// Reusable buffer for quantized activations. It grows only when a call needs more than it holds, so steady-state
// calls allocate nothing. Not thread-safe: one scratch per concurrent matmul caller.
class MatmulScratch {
 public:
  MatmulScratch() = default;
  MatmulScratch(const MatmulScratch&) = delete;
  MatmulScratch& operator=(const MatmulScratch&) = delete;
  MatmulScratch(MatmulScratch&&) = default;
  MatmulScratch& operator=(MatmulScratch&&) = default;

  // Returns at least `bytes` bytes, 64-byte aligned; the previous contents are lost when it grows.
  [[nodiscard]] uint8_t* reserve(size_t bytes);
  size_t capacity() const { return capacity_; }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, AlignedFree> buffer_;
  size_t capacity_ = 0;
};

// Bytes of MatmulScratch a matmul of n_tokens rows against weights of this type and width asks for (packed: the
// packed tiles' activation sums too). Memory estimates use it: a model's scratch is the largest of its matrices'.
[[nodiscard]] size_t matmul_scratch_bytes(DType weight_type, int64_t n_cols, int64_t n_tokens, bool packed);

// The activation format a weight type is multiplied with: F32, Q8_0 or Q8_K.
DType matmul_activation_type(DType weight_type);

// True when matmul handles weights of this type.
bool matmul_supported(DType weight_type);

// Bytes of activation rows a matmul keeps cache-resident while it sweeps a block of weight rows over them (half
// the L2 this CPU reports, at least 192 KiB): a call over more tokens than fit runs in several token chunks, which
// never changes a result. Tests size their token counts by it to cross a chunk boundary.
size_t matmul_token_chunk_bytes();

// y = x · Wᵀ with the active ISA level, rows split over `pool`.
// x: [n_tokens, w.n_cols] fp32, contiguous.  y: [n_tokens, w.n_rows] fp32, contiguous; must not alias x.
// Requires matmul_supported(w.type) and n_cols a multiple of the block size; aborts otherwise.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch);

// One matrix of matmul_group and its output [n_tokens, w->n_rows].
struct MatmulOutput {
  const MatrixView* w;
  float* y;
};
inline constexpr size_t kMaxMatmulGroup = 4;

// y_i = x · W_iᵀ for up to kMaxMatmulGroup matrices of the same n_cols that read the same x (q, k and v; gate and
// up): x is quantized once per activation format and the rows of matrices of one type share one pool call, so a
// decode step waits at one barrier instead of one per matrix. Each output is bitwise what matmul gives alone.
void matmul_group(std::span<const MatmulOutput> outputs, const float* x, int64_t n_tokens, ThreadPool& pool,
                  MatmulScratch& scratch);

// The scalar reference twin of matmul: same activation quantization, plain loops, one thread. matmul at
// IsaLevel::kScalar gives bitwise the same result.
void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace hearth

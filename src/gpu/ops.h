#pragma once
// The GPU twins of the CPU kernels: one pipeline per shader, made once per Context, and a recording function per
// op. Each op computes bitwise what its CPU reference does (docs/vulkan.md lists each one and its one caveat).
//
// Shapes are in elements; every buffer is a gpu::Buffer the caller owns. An op records a dispatch into `rec`
// (CommandRecorder::begin first, run after); it fails when the dispatch cannot be recorded or a shape exceeds the
// 32-bit offsets the shaders use.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/shaders.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace hearth::gpu {

// True when matmul below has a shader for weights of this type.
bool matmul_supported(DType weight_type);

// Converts n_tokens rows of fp32 activations [n_tokens, n_cols] into what the matmul shader of weight_type reads,
// exactly as matmul_reference does: Q8_0 blocks (Q8_0, Q4_0 weights) or Q8_K blocks (Q4_K, Q6_K) by the CPU
// reference quantizers, or the fp32 rows as they are (F16, F32, BF16). `out` is resized to n_tokens ·
// activation_row_bytes(weight_type, n_cols).
void prepare_activations(DType weight_type, const float* x, int64_t n_tokens, int64_t n_cols,
                         std::vector<uint8_t>& out);
size_t activation_row_bytes(DType weight_type, int64_t n_cols);

class Kernels {
 public:
  // Creates every pipeline of kAllShaders on ctx. rms_norm, silu_mul, softmax and quantize_activations need
  // shaderFloat64 (common.glsl's fma_rn and sqrt_rn); on a device without it those pipelines are not made and the ops
  // fail with a message.
  [[nodiscard]] static Result<std::unique_ptr<Kernels>> create(Context& ctx);

  // y = x · Wᵀ, y[t][r] = vec_dot_reference(W row r, x row t), as matmul_reference.
  // w: [n_rows] rows of row_bytes(type, n_cols), w_row_bytes apart.  x: prepare_activations' rows, [n_tokens].
  // y: [n_tokens, n_rows] fp32.  Requires matmul_supported(type) and n_cols a multiple of the block size.
  [[nodiscard]] Result<void> matmul(CommandRecorder& rec, DType type, const Buffer& w, int64_t n_rows, int64_t n_cols,
                                    size_t w_row_bytes, const Buffer& x, int64_t n_tokens, Buffer& y) const;

  // Quantizes fp32 activations on the device into what matmul of weight_type reads, byte for byte what
  // prepare_activations writes: Q8_0 blocks for Q8_0 and Q4_0 weights (quantize_row_q8_0), Q8_K blocks for Q4_K
  // and Q6_K (quantize_row_q8_k); so a decode step need not leave the device. F16 weights read x as it is: none.
  // x: [n_tokens, n_cols] fp32, contiguous.   out: n_tokens rows of activation_row_bytes(weight_type, n_cols).
  [[nodiscard]] Result<void> quantize_activations(CommandRecorder& rec, DType weight_type, const Buffer& x, Buffer& out,
                                                  int64_t n_tokens, int64_t n_cols) const;

  // y[r] = rms_norm(x[r], w, eps) for each of n_rows rows of n, as hearth::rms_norm.   x, y: [n_rows, n]  w: [n]
  [[nodiscard]] Result<void> rms_norm(CommandRecorder& rec, const Buffer& x, const Buffer& w, Buffer& y, int64_t n_rows,
                                      int64_t n, float eps) const;

  // out = silu(gate) · up, as hearth::silu_mul.                                     gate, up, out: [n]
  [[nodiscard]] Result<void> silu_mul(CommandRecorder& rec, const Buffer& gate, const Buffer& up, Buffer& out,
                                      int64_t n) const;

  // One step of attention's online softmax from a fresh state, per row: m = max s, probs = exp(s − m) with
  // attention's exp (attention_exp), sums = Σ probs in dot_lanes' order.   scores, probs: [n_rows, n]  sums: [n_rows]
  [[nodiscard]] Result<void> softmax(CommandRecorder& rec, const Buffer& scores, Buffer& probs, Buffer& sums,
                                     int64_t n_rows, int64_t n) const;

  // rope_apply on each of n_heads heads of each token, in place, with cos_sin rows that rope_fill_cos_sin filled
  // for each token's position.       x: [n_tokens, row_stride], head h at h · head_dim   cos_sin: [n_tokens, rope_dim]
  [[nodiscard]] Result<void> rope(CommandRecorder& rec, Buffer& x, const Buffer& cos_sin, int64_t n_tokens,
                                  int64_t n_heads, int64_t head_dim, int64_t rope_dim, int64_t row_stride,
                                  bool neox) const;

 private:
  Kernels() = default;
  Error no_float64(const char* op) const;
  const Pipeline* pipeline(Shader shader) const { return pipelines_[static_cast<size_t>(shader)].get(); }
  std::vector<std::unique_ptr<Pipeline>> pipelines_;  // by Shader
  std::string device_name_;
};

}  // namespace hearth::gpu

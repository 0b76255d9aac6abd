#include "gpu/ops.h"

#include <cstring>
#include <limits>

#include "tensor/quant.h"

namespace hearth::gpu {
namespace {

constexpr uint32_t kGroupSize = 64;  // local_size_x of every shader

struct MatmulPush {  // matmul_q8_0.comp, matmul_q4_0.comp, matmul_q4_k.comp, matmul_q6_k.comp
  uint32_t n_rows, n_blocks, w_row_bytes, x_row_bytes;
};
struct MatmulF16Push {  // matmul_f16.comp, matmul_f32.comp (and its BF16 build)
  uint32_t n_rows, n_cols, w_row_bytes;
};
struct RmsNormPush {
  uint32_t n;
  float eps;
};
struct SiluMulPush {
  uint32_t n;
};
struct SoftmaxPush {
  uint32_t n;
};
struct QuantizePush {
  uint32_t n_blocks_total;
};
struct RopePush {
  uint32_t n_heads, head_dim, rope_dim, row_stride, neox;
};

uint32_t push_bytes(Shader shader) {
  switch (shader) {
    case Shader::kMatmulQ8_0:
    case Shader::kMatmulQ4_0:
    case Shader::kMatmulQ4_K:
    case Shader::kMatmulQ6_K:
      return sizeof(MatmulPush);
    case Shader::kMatmulF16:
    case Shader::kMatmulF32:
    case Shader::kMatmulBF16:
      return sizeof(MatmulF16Push);
    case Shader::kRmsNorm:
      return sizeof(RmsNormPush);
    case Shader::kSiluMul:
      return sizeof(SiluMulPush);
    case Shader::kRope:
      return sizeof(RopePush);
    case Shader::kSoftmax:
      return sizeof(SoftmaxPush);
    case Shader::kQuantizeQ8_0:
    case Shader::kQuantizeQ8_K:
      return sizeof(QuantizePush);
  }
  return 0;
}

uint32_t n_buffers(Shader shader) {
  return shader == Shader::kRope || shader == Shader::kQuantizeQ8_0 || shader == Shader::kQuantizeQ8_K ? 2 : 3;
}

// The shaders index with 32-bit byte offsets.
Result<void> check_fits(const char* op, uint64_t bytes) {
  if (bytes > std::numeric_limits<uint32_t>::max()) {
    return make_error("gpu {}: {} bytes exceed the shaders' 32-bit offsets", op, bytes);
  }
  return {};
}

}  // namespace

bool matmul_supported(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::F16:
    case DType::F32:
    case DType::BF16:
    case DType::Q4_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

// What the shader of weight_type reads as activations: matmul_reference's activation type.
DType activation_type(DType weight_type) {
  switch (weight_type) {
    case DType::F16:
    case DType::F32:
    case DType::BF16:
      return DType::F32;
    case DType::Q4_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::Q8_0;
  }
}

size_t activation_row_bytes(DType weight_type, int64_t n_cols) {
  return row_bytes(activation_type(weight_type), n_cols);
}

void prepare_activations(DType weight_type, const float* x, int64_t n_tokens, int64_t n_cols,
                         std::vector<uint8_t>& out) {
  HEARTH_CHECK(matmul_supported(weight_type), "no GPU matmul for {}", dtype_name(weight_type));
  const size_t row = activation_row_bytes(weight_type, n_cols);
  out.resize(row * static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    uint8_t* dst = out.data() + t * row;
    switch (activation_type(weight_type)) {
      case DType::F32:
        std::memcpy(dst, x + t * n_cols, row);
        break;
      case DType::Q8_K:
        quantize_row_q8_k(x + t * n_cols, reinterpret_cast<BlockQ8_K*>(dst), n_cols);
        break;
      default:
        quantize_row_q8_0(x + t * n_cols, reinterpret_cast<BlockQ8_0*>(dst), n_cols);
        break;
    }
  }
}

Result<std::unique_ptr<Kernels>> Kernels::create(Context& ctx) {
  std::unique_ptr<Kernels> k(new Kernels());
  k->device_name_ = ctx.info().name;
  k->pipelines_.resize(std::size(kAllShaders));  // indexed by Shader, whatever kAllShaders' order
  for (Shader shader : kAllShaders) {
    const bool needs_float64 = shader == Shader::kRmsNorm || shader == Shader::kSiluMul || shader == Shader::kSoftmax ||
                               shader == Shader::kQuantizeQ8_0 || shader == Shader::kQuantizeQ8_K;  // fma_rn: doubles
    if (needs_float64 && !ctx.info().has_float64) continue;
    auto p = Pipeline::create(ctx, shader_name(shader), shader_spirv(shader), n_buffers(shader), push_bytes(shader));
    if (!p) return p.error();
    k->pipelines_[static_cast<size_t>(shader)] = std::move(*p);
  }
  return k;
}

Result<void> Kernels::matmul(CommandRecorder& rec, DType type, const Buffer& w, int64_t n_rows, int64_t n_cols,
                             size_t w_row_bytes, const Buffer& x, int64_t n_tokens, Buffer& y) const {
  HEARTH_CHECK(matmul_supported(type), "no GPU matmul for {}", dtype_name(type));
  HEARTH_CHECK(n_cols % dtype_info(type).block_size == 0, "n_cols {} is no multiple of the block", n_cols);
  HEARTH_TRY(check_fits("matmul", static_cast<uint64_t>(n_rows) * w_row_bytes));
  HEARTH_TRY(check_fits("matmul", static_cast<uint64_t>(n_tokens) * activation_row_bytes(type, n_cols)));
  const uint32_t groups = groups_for(n_rows, kGroupSize);
  const auto tokens = static_cast<uint32_t>(n_tokens);
  if (activation_type(type) == DType::F32) {
    const MatmulF16Push push{static_cast<uint32_t>(n_rows), static_cast<uint32_t>(n_cols),
                             static_cast<uint32_t>(w_row_bytes)};
    const Shader shader = type == DType::F16   ? Shader::kMatmulF16
                          : type == DType::F32 ? Shader::kMatmulF32
                                               : Shader::kMatmulBF16;
    return rec.dispatch(*pipeline(shader), {&w, &x, &y}, &push, groups, tokens);
  }
  const MatmulPush push{static_cast<uint32_t>(n_rows), static_cast<uint32_t>(n_cols / dtype_info(type).block_size),
                        static_cast<uint32_t>(w_row_bytes), static_cast<uint32_t>(activation_row_bytes(type, n_cols))};
  const Shader shader = type == DType::Q8_0   ? Shader::kMatmulQ8_0
                        : type == DType::Q4_0 ? Shader::kMatmulQ4_0
                        : type == DType::Q4_K ? Shader::kMatmulQ4_K
                                              : Shader::kMatmulQ6_K;
  return rec.dispatch(*pipeline(shader), {&w, &x, &y}, &push, groups, tokens);
}

Result<void> Kernels::rms_norm(CommandRecorder& rec, const Buffer& x, const Buffer& w, Buffer& y, int64_t n_rows,
                               int64_t n, float eps) const {
  const Pipeline* p = pipeline(Shader::kRmsNorm);
  if (p == nullptr) return no_float64("rms_norm");
  HEARTH_TRY(check_fits("rms_norm", static_cast<uint64_t>(n_rows) * n * sizeof(float)));
  const RmsNormPush push{static_cast<uint32_t>(n), eps};
  return rec.dispatch(*p, {&x, &w, &y}, &push, static_cast<uint32_t>(n_rows));
}

Result<void> Kernels::silu_mul(CommandRecorder& rec, const Buffer& gate, const Buffer& up, Buffer& out,
                               int64_t n) const {
  if (pipeline(Shader::kSiluMul) == nullptr) return no_float64("silu_mul");
  HEARTH_TRY(check_fits("silu_mul", static_cast<uint64_t>(n) * sizeof(float)));
  const SiluMulPush push{static_cast<uint32_t>(n)};
  return rec.dispatch(*pipeline(Shader::kSiluMul), {&gate, &up, &out}, &push, groups_for(n, kGroupSize));
}

Result<void> Kernels::rope(CommandRecorder& rec, Buffer& x, const Buffer& cos_sin, int64_t n_tokens, int64_t n_heads,
                           int64_t head_dim, int64_t rope_dim, int64_t row_stride, bool neox) const {
  HEARTH_CHECK(rope_dim % 2 == 0 && rope_dim <= head_dim, "rope_dim {} of head_dim {}", rope_dim, head_dim);
  HEARTH_TRY(check_fits("rope", static_cast<uint64_t>(n_tokens) * row_stride * sizeof(float)));
  const RopePush push{static_cast<uint32_t>(n_heads), static_cast<uint32_t>(head_dim), static_cast<uint32_t>(rope_dim),
                      static_cast<uint32_t>(row_stride), neox ? 1u : 0u};
  return rec.dispatch(*pipeline(Shader::kRope), {&x, &cos_sin}, &push, groups_for(rope_dim / 2, kGroupSize),
                      static_cast<uint32_t>(n_heads), static_cast<uint32_t>(n_tokens));
}

Result<void> Kernels::softmax(CommandRecorder& rec, const Buffer& scores, Buffer& probs, Buffer& sums, int64_t n_rows,
                              int64_t n) const {
  const Pipeline* p = pipeline(Shader::kSoftmax);
  if (p == nullptr) return no_float64("softmax");
  HEARTH_TRY(check_fits("softmax", static_cast<uint64_t>(n_rows) * n * sizeof(float)));
  const SoftmaxPush push{static_cast<uint32_t>(n)};
  return rec.dispatch(*p, {&scores, &probs, &sums}, &push, static_cast<uint32_t>(n_rows));
}

Result<void> Kernels::quantize_activations(CommandRecorder& rec, DType weight_type, const Buffer& x, Buffer& out,
                                           int64_t n_tokens, int64_t n_cols) const {
  const DType act = activation_type(weight_type);
  HEARTH_CHECK(matmul_supported(weight_type) && act != DType::F32, "no activation quantization for {}",
               dtype_name(weight_type));
  const Shader shader = act == DType::Q8_K ? Shader::kQuantizeQ8_K : Shader::kQuantizeQ8_0;
  const Pipeline* p = pipeline(shader);
  if (p == nullptr) return no_float64(shader_name(shader));
  const int64_t block = dtype_info(act).block_size;
  HEARTH_CHECK(n_cols % block == 0, "n_cols {} is no multiple of {}", n_cols, block);
  HEARTH_TRY(check_fits("quantize_activations", static_cast<uint64_t>(n_tokens) * n_cols * sizeof(float)));
  const auto n_blocks = static_cast<uint32_t>(n_tokens * n_cols / block);
  const QuantizePush push{n_blocks};
  // quantize_q8_0 writes a pair of 34-byte blocks per invocation (whole words), quantize_q8_k one 292-byte block.
  const uint32_t n_invocations = act == DType::Q8_K ? n_blocks : (n_blocks + 1) / 2;
  return rec.dispatch(*p, {&x, &out}, &push, groups_for(n_invocations, kGroupSize));
}

Error Kernels::no_float64(const char* op) const {
  return make_error("gpu {} needs shaderFloat64, which {} lacks", op, device_name_);
}

}  // namespace hearth::gpu

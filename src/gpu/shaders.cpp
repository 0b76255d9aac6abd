#include "gpu/shaders.h"

namespace hearth::gpu {
namespace {

// Each .spv.inc is glslc -mfmt=c output: a brace-enclosed list of the module's 32-bit words.
constexpr uint32_t kMatmulQ8_0[] =
#include "matmul_q8_0.spv.inc"
    ;
constexpr uint32_t kMatmulQ4_0[] =
#include "matmul_q4_0.spv.inc"
    ;
constexpr uint32_t kMatmulF16[] =
#include "matmul_f16.spv.inc"
    ;
constexpr uint32_t kMatmulF32[] =
#include "matmul_f32.spv.inc"
    ;
constexpr uint32_t kMatmulBF16[] =
#include "matmul_bf16.spv.inc"
    ;
constexpr uint32_t kMatmulQ4_K[] =
#include "matmul_q4_k.spv.inc"
    ;
constexpr uint32_t kMatmulQ6_K[] =
#include "matmul_q6_k.spv.inc"
    ;
constexpr uint32_t kRmsNorm[] =
#include "rms_norm.spv.inc"
    ;
constexpr uint32_t kSiluMul[] =
#include "silu_mul.spv.inc"
    ;
constexpr uint32_t kRope[] =
#include "rope.spv.inc"
    ;
constexpr uint32_t kSoftmax[] =
#include "softmax.spv.inc"
    ;
constexpr uint32_t kQuantizeQ8_0[] =
#include "quantize_q8_0.spv.inc"
    ;
constexpr uint32_t kQuantizeQ8_K[] =
#include "quantize_q8_k.spv.inc"
    ;

}  // namespace

const char* shader_name(Shader shader) {
  switch (shader) {
    case Shader::kMatmulQ8_0:
      return "matmul_q8_0";
    case Shader::kMatmulQ4_0:
      return "matmul_q4_0";
    case Shader::kMatmulF16:
      return "matmul_f16";
    case Shader::kMatmulF32:
      return "matmul_f32";
    case Shader::kMatmulBF16:
      return "matmul_bf16";
    case Shader::kMatmulQ4_K:
      return "matmul_q4_k";
    case Shader::kMatmulQ6_K:
      return "matmul_q6_k";
    case Shader::kRmsNorm:
      return "rms_norm";
    case Shader::kSiluMul:
      return "silu_mul";
    case Shader::kRope:
      return "rope";
    case Shader::kSoftmax:
      return "softmax";
    case Shader::kQuantizeQ8_0:
      return "quantize_q8_0";
    case Shader::kQuantizeQ8_K:
      return "quantize_q8_k";
  }
  return "?";
}

std::span<const uint32_t> shader_spirv(Shader shader) {
  switch (shader) {
    case Shader::kMatmulQ8_0:
      return kMatmulQ8_0;
    case Shader::kMatmulQ4_0:
      return kMatmulQ4_0;
    case Shader::kMatmulF16:
      return kMatmulF16;
    case Shader::kMatmulF32:
      return kMatmulF32;
    case Shader::kMatmulBF16:
      return kMatmulBF16;
    case Shader::kMatmulQ4_K:
      return kMatmulQ4_K;
    case Shader::kMatmulQ6_K:
      return kMatmulQ6_K;
    case Shader::kRmsNorm:
      return kRmsNorm;
    case Shader::kSiluMul:
      return kSiluMul;
    case Shader::kRope:
      return kRope;
    case Shader::kSoftmax:
      return kSoftmax;
    case Shader::kQuantizeQ8_0:
      return kQuantizeQ8_0;
    case Shader::kQuantizeQ8_K:
      return kQuantizeQ8_K;
  }
  return {};
}

}  // namespace hearth::gpu

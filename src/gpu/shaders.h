#pragma once
// The SPIR-V of every shader in src/gpu/shaders/, compiled by glslc at build time and embedded in the binary, so
// nothing is read from disk at run time.

#include <cstdint>
#include <span>

namespace hearth::gpu {

enum class Shader {
  kMatmulQ8_0,
  kMatmulQ4_0,
  kMatmulF16,
  kMatmulF32,
  kMatmulBF16,
  kMatmulQ4_K,
  kMatmulQ6_K,
  kRmsNorm,
  kSiluMul,
  kRope,
  kSoftmax,
  kQuantizeQ8_0,
  kQuantizeQ8_K,
};
// Every Shader, in the enum's order.
inline constexpr Shader kAllShaders[] = {
    Shader::kMatmulQ8_0, Shader::kMatmulQ4_0,   Shader::kMatmulF16,   Shader::kMatmulF32, Shader::kMatmulBF16,
    Shader::kMatmulQ4_K, Shader::kMatmulQ6_K,   Shader::kRmsNorm,     Shader::kSiluMul,   Shader::kRope,
    Shader::kSoftmax,    Shader::kQuantizeQ8_0, Shader::kQuantizeQ8_K};

const char* shader_name(Shader shader);
std::span<const uint32_t> shader_spirv(Shader shader);

}  // namespace hearth::gpu

#pragma once
// DType: the GGML tensor element types, numbered as in the GGUF file format. The table knows every type a
// GGUF file may name (so a file can be parsed and sized); `compute_supported` says which ones Hearth runs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hearth {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t block_size;   // elements per block
  size_t block_bytes;   // bytes per block
  bool compute_supported;  // Hearth has dequantize + dot kernels for it
};

// Returns the info of a raw GGUF type id, or nullopt when the id names no known type.
std::optional<DTypeInfo> dtype_info(uint32_t raw);
const DTypeInfo& dtype_info(DType type);
std::string_view dtype_name(DType type);
// The names of the types Hearth computes with, in table order, comma-separated (for error messages).
std::string compute_supported_names();

// Bytes for a row of `n` elements; requires n % block_size == 0.
size_t row_bytes(DType type, int64_t n);

}  // namespace hearth

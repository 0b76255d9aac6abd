#include "tensor/dtype.h"

#include <array>

#include "util/result.h"

namespace hearth {
namespace {

constexpr std::array kTable = {
    DTypeInfo{DType::F32, "F32", 1, 4, true},
    DTypeInfo{DType::F16, "F16", 1, 2, true},
    DTypeInfo{DType::Q4_0, "Q4_0", 32, 18, true},
    DTypeInfo{DType::Q4_1, "Q4_1", 32, 20, true},
    DTypeInfo{DType::Q5_0, "Q5_0", 32, 22, true},
    DTypeInfo{DType::Q5_1, "Q5_1", 32, 24, true},
    DTypeInfo{DType::Q8_0, "Q8_0", 32, 34, true},
    DTypeInfo{DType::Q8_1, "Q8_1", 32, 36, false},
    DTypeInfo{DType::Q2_K, "Q2_K", 256, 84, true},
    DTypeInfo{DType::Q3_K, "Q3_K", 256, 110, true},
    DTypeInfo{DType::Q4_K, "Q4_K", 256, 144, true},
    DTypeInfo{DType::Q5_K, "Q5_K", 256, 176, true},
    DTypeInfo{DType::Q6_K, "Q6_K", 256, 210, true},
    DTypeInfo{DType::Q8_K, "Q8_K", 256, 292, false},
    DTypeInfo{DType::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    DTypeInfo{DType::IQ2_XS, "IQ2_XS", 256, 74, false},
    DTypeInfo{DType::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    DTypeInfo{DType::IQ1_S, "IQ1_S", 256, 50, false},
    DTypeInfo{DType::IQ4_NL, "IQ4_NL", 32, 18, true},
    DTypeInfo{DType::IQ3_S, "IQ3_S", 256, 110, false},
    DTypeInfo{DType::IQ2_S, "IQ2_S", 256, 82, false},
    DTypeInfo{DType::IQ4_XS, "IQ4_XS", 256, 136, true},
    DTypeInfo{DType::I8, "I8", 1, 1, false},
    DTypeInfo{DType::I16, "I16", 1, 2, false},
    DTypeInfo{DType::I32, "I32", 1, 4, false},
    DTypeInfo{DType::I64, "I64", 1, 8, false},
    DTypeInfo{DType::F64, "F64", 1, 8, false},
    DTypeInfo{DType::IQ1_M, "IQ1_M", 256, 56, false},
    DTypeInfo{DType::BF16, "BF16", 1, 2, true},
    DTypeInfo{DType::TQ1_0, "TQ1_0", 256, 54, false},
    DTypeInfo{DType::TQ2_0, "TQ2_0", 256, 66, false},
    DTypeInfo{DType::MXFP4, "MXFP4", 32, 17, true},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t raw) {
  for (const auto& info : kTable) {
    if (static_cast<uint32_t>(info.type) == raw) return info;
  }
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType type) {
  for (const auto& info : kTable) {
    if (info.type == type) return info;
  }
  HEARTH_CHECK(false, "unknown dtype {}", static_cast<uint32_t>(type));
}

std::string_view dtype_name(DType type) { return dtype_info(type).name; }

std::string compute_supported_names() {
  std::string names;
  for (const auto& info : kTable) {
    if (!info.compute_supported) continue;
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

size_t row_bytes(DType type, int64_t n) {
  const auto& info = dtype_info(type);
  HEARTH_CHECK(n % info.block_size == 0, "row of {} elements is not a multiple of {} block size {}", n,
               info.name, info.block_size);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

}  // namespace hearth

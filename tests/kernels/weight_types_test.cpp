// The weight-type table (kernels/weight_types.h): every type dtype_info calls computable has one complete row, and
// nothing else has one. The matmul and packed suites iterate the same table, so a new row is tested there at once.

#include "kernels/weight_types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "tensor/dtype.h"

namespace hearth {
namespace {

using kernels::PackedLayout;
using kernels::TileKernel;
using kernels::WeightType;

// Every raw type number a GGUF file may carry, as far as dtype_info knows them.
std::vector<DType> all_dtypes() {
  std::vector<DType> types;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    if (const auto info = dtype_info(raw)) types.push_back(info->type);
  }
  return types;
}

constexpr bool kX86 =
#if defined(__x86_64__)
    true;
#else
    false;
#endif

// A tile is set when it exists and, on x86-64, has a function (other builds have no vector tiles).
void expect_tile(const TileKernel* tile, const std::string& what) {
  ASSERT_NE(tile, nullptr) << what;
  if (kX86) {
    EXPECT_NE(tile->fn, nullptr) << what;
  }
  EXPECT_GE(tile->max_rows, 1) << what;
  EXPECT_GE(tile->max_tokens, 1) << what;
}

void expect_complete_packed_layout(const WeightType& row) {
  const PackedLayout& p = *row.packed;
  const std::string name(dtype_name(row.type));
  EXPECT_EQ(p.unit_cols, dtype_info(row.type).block_size) << name;
  EXPECT_GT(p.unit_bytes, 0u) << name;
  EXPECT_EQ(2 * p.unit_bytes % 32, 0u) << name << ": a group's 32-byte loads stay aligned (units go in pairs)";
  EXPECT_GT(p.corrections_per_unit, 0) << name;
  EXPECT_NE(p.pack_group, nullptr) << name;
  EXPECT_NE(p.corrections, nullptr) << name;
  for (const auto& [tile, level] : {std::pair{p.avx2_tile, "avx2"}, std::pair{p.avx_vnni_tile, "avx2+avxvnni"},
                                    std::pair{p.avx512_vnni_tile, "avx512vnni"}}) {
    expect_tile(tile, name + " packed " + level);
    if (tile != nullptr) {
      EXPECT_EQ(tile->max_rows % kPackRows, 0) << name << " packed " << level;
    }
  }
}

TEST(KernelTable, EveryComputableTypeHasACompleteRow) {
  for (DType type : all_dtypes()) {
    if (!dtype_info(type).compute_supported) continue;
    const std::string name(dtype_name(type));
    const WeightType* row = kernels::find_weight_type(type);
    ASSERT_NE(row, nullptr) << name << " is computable and has no row in kernels/weight_types.cpp";
    EXPECT_EQ(row->type, type);
    ASSERT_NE(row->activation, nullptr) << name;
    const DType act = row->activation->type;
    EXPECT_TRUE(act == DType::F32 || act == DType::Q8_0 || act == DType::Q8_K) << name;
    EXPECT_EQ(dtype_info(act).block_size, dtype_info(type).block_size) << name << ": activation blocks align";
    EXPECT_EQ(matmul_activation_type(type), act) << name;
    EXPECT_NE(row->activation->quantize, nullptr) << name;
    if (kX86) {
      EXPECT_EQ(row->activation->quantize_avx2 != nullptr, act != DType::F32) << name;
    }
    EXPECT_NE(row->scalar.dot, nullptr) << name;
    expect_tile(row->scalar.tile, name + " scalar");
    expect_tile(row->avx2.tile, name + " avx2");
    if (row->packed != nullptr) expect_complete_packed_layout(*row);
  }
}

TEST(KernelTable, OnlyComputableTypesHaveRows) {
  std::set<DType> seen;
  for (const WeightType& row : kernels::weight_types()) {
    EXPECT_TRUE(dtype_info(row.type).compute_supported) << dtype_name(row.type) << " has a row, not a dequantizer";
    EXPECT_TRUE(seen.insert(row.type).second) << dtype_name(row.type) << " has two rows";
    EXPECT_EQ(kernels::find_weight_type(row.type), &row) << dtype_name(row.type);
  }
  for (DType type : all_dtypes()) {
    if (!dtype_info(type).compute_supported) {
      EXPECT_EQ(kernels::find_weight_type(type), nullptr) << dtype_name(type);
    }
  }
}

// The tile a level runs: the scalar one at kScalar, the AVX2 one above it on the GGUF layout, the level's own on a
// packed layout.
TEST(KernelTable, EachLevelRunsItsTile) {
  for (const WeightType& row : kernels::weight_types()) {
    EXPECT_EQ(&kernels::gguf_tile(row, IsaLevel::kScalar), row.scalar.tile) << dtype_name(row.type);
    for (IsaLevel level : {IsaLevel::kAvx2, IsaLevel::kAvxVnni, IsaLevel::kAvx512Vnni}) {
      EXPECT_EQ(&kernels::gguf_tile(row, level), kX86 ? row.avx2.tile : row.scalar.tile) << dtype_name(row.type);
    }
    if (row.packed == nullptr) continue;
    EXPECT_EQ(&kernels::packed_tile(*row.packed, IsaLevel::kAvx2), row.packed->avx2_tile);
    EXPECT_EQ(&kernels::packed_tile(*row.packed, IsaLevel::kAvxVnni), row.packed->avx_vnni_tile);
    EXPECT_EQ(&kernels::packed_tile(*row.packed, IsaLevel::kAvx512Vnni), row.packed->avx512_vnni_tile);
  }
}

}  // namespace
}  // namespace hearth

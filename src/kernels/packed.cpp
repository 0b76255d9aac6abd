#include "kernels/packed.h"

#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/vec_dot.h"
#include "tensor/quant.h"
#include "util/result.h"

namespace hearth {
namespace {

constexpr size_t kAlignment = 64;

void pack_group_q8_0(const MatrixView& w, int64_t row0, uint8_t* group) {
  const int64_t n_blocks = w.n_cols / kQK8_0;
  uint8_t* quants = group;
  uint16_t* scales = reinterpret_cast<uint16_t*>(group + n_blocks * kernels::kPackedQ8_0QuantBytes);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* q = quants + b * kernels::kPackedQ8_0QuantBytes;
    for (int r = 0; r < kPackRows; ++r) {
      const bool real = row0 + r < w.n_rows;
      const BlockQ8_0* block =
          real ? reinterpret_cast<const BlockQ8_0*>(w.data + (row0 + r) * w.row_stride) + b : nullptr;
      scales[b * kPackRows + r] = real ? block->d : 0;
      for (int c = 0; c < kQK8_0 / 4; ++c) {
        for (int j = 0; j < 4; ++j) {
          const int8_t value = real ? block->qs[4 * c + j] : 0;
          q[c * 32 + r * 4 + j] = static_cast<uint8_t>(static_cast<uint8_t>(value) ^ 0x80);  // value + 128
        }
      }
    }
  }
}

void pack_group_q4_0(const MatrixView& w, int64_t row0, uint8_t* group) {
  const int64_t n_blocks = w.n_cols / kQK4_0;
  uint8_t* quants = group;
  uint16_t* scales = reinterpret_cast<uint16_t*>(group + n_blocks * kernels::kPackedQ4_0QuantBytes);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* q = quants + b * kernels::kPackedQ4_0QuantBytes;
    for (int r = 0; r < kPackRows; ++r) {
      const bool real = row0 + r < w.n_rows;
      const BlockQ4_0* block =
          real ? reinterpret_cast<const BlockQ4_0*>(w.data + (row0 + r) * w.row_stride) + b : nullptr;
      scales[b * kPackRows + r] = real ? block->d : 0;
      for (int c = 0; c < kQK4_0 / 8; ++c) {
        for (int j = 0; j < 4; ++j) q[c * 32 + r * 4 + j] = real ? block->qs[4 * c + j] : 0x88;  // zero weights
      }
    }
  }
}

}  // namespace

bool packing_available(DType type) {
  if (detected_isa_level() < IsaLevel::kAvxVnni) return false;
  return type == DType::Q8_0 || type == DType::Q4_0;
}

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w) {
  HEARTH_CHECK(packing_available(w.type), "pack_matrix: no packed layout for {}", dtype_name(w.type));
  HEARTH_CHECK(w.n_cols % 32 == 0 && w.n_rows >= 0, "pack_matrix: bad shape");
  auto p = std::make_unique<PackedMatrix>();
  p->type = w.type;
  p->n_rows = w.n_rows;
  p->n_cols = w.n_cols;
  const int64_t n_blocks = w.n_cols / 32;
  const size_t quant_bytes = w.type == DType::Q8_0 ? kernels::kPackedQ8_0QuantBytes : kernels::kPackedQ4_0QuantBytes;
  p->group_bytes = static_cast<size_t>(n_blocks) * (quant_bytes + kPackRows * sizeof(uint16_t));
  // Groups start on a cache line: quant blocks are 256 or 128 bytes, so each stays inside its own lines.
  p->group_bytes = (p->group_bytes + kAlignment - 1) / kAlignment * kAlignment;
  p->storage.reset(new uint8_t[p->bytes() + kAlignment]);
  const auto base = reinterpret_cast<uintptr_t>(p->storage.get());
  p->data = p->storage.get() + ((kAlignment - base % kAlignment) % kAlignment);
  for (int64_t g = 0; g < p->n_groups(); ++g) {
    uint8_t* group = p->data + static_cast<size_t>(g) * p->group_bytes;
    std::memset(group, 0, p->group_bytes);
    if (w.type == DType::Q8_0) {
      pack_group_q8_0(w, g * kPackRows, group);
    } else {
      pack_group_q4_0(w, g * kPackRows, group);
    }
  }
  return p;
}

}  // namespace hearth

#pragma once
// Weight matrices repacked at load for the AVX-VNNI tiles (IsaLevel::kAvxVnni, vec_dot_vnni.cpp).
//
// The row-major GGUF layout makes every output one horizontal reduction per block (8 int32 lanes of one row to one
// sum), and on AVX2 those reductions and the sign tricks around maddubs cost more than the products. A packed matrix
// interleaves 8 rows four columns at a time, so one vpdpbusd multiplies four columns of 8 rows by the same four
// activation bytes and leaves each row's block sum in its own lane: no horizontal work at all.
//
// Layout, per group of 8 rows (the last group padded with zero-scale rows), n_blocks = n_cols / 32:
//   quants [n_blocks][kQuantBytes]   block b's 8 rows × 32 columns, see below
//   scales [n_blocks][8] fp16        row r's scale of block b
// Q8_0: 256 bytes per block; byte c·32 + r·4 + j is row r's column 4c + j (c < 8) plus 128, as an unsigned byte.
// Q4_0: 128 bytes per block; byte c·32 + r·4 + j is row r's original byte 4c + j (c < 4): its low nibble is column
//       4c + j plus 8, its high nibble column 16 + 4c + j plus 8.
// The unsigned weights are the vpdpbusd operand that must be unsigned; the +128 / +8 offsets are taken back exactly
// with the activation block's Σx (PackedActivations), so every block's integer sum is the exact Σ w·x.
//
// The mapped original stays the weight of record (the cache fingerprint hashes it, other ISA levels read it); the
// packed copy is extra anonymous memory of the same size as the original matrix.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/matmul.h"
#include "tensor/dtype.h"

namespace hearth {

inline constexpr int kPackRows = 8;

struct PackedMatrix {
  DType type = DType::Q8_0;  // the original type: Q8_0 or Q4_0
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t group_bytes = 0;  // bytes of one group of kPackRows rows
  std::unique_ptr<uint8_t[]> storage;
  uint8_t* data = nullptr;  // 64-byte aligned, inside storage

  int64_t n_groups() const { return (n_rows + kPackRows - 1) / kPackRows; }
  size_t bytes() const { return group_bytes * static_cast<size_t>(n_groups()); }
};

// True when weights of this type have a packed layout and this CPU has the ISA its tiles need.
bool packing_available(DType type);

// The packed copy of `w` (requires packing_available(w.type)), for MatrixView::packed of a view of the same rows.
std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w);

}  // namespace hearth

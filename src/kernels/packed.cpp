#include "kernels/packed.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_isa.h"
#include "kernels/vec_dot.h"
#include "kernels/weight_types.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "util/result.h"

namespace hearth::kernels {

void pack_group_q8_0(const MatrixView& w, int64_t row0, uint8_t* group) {
  const int64_t n_blocks = w.n_cols / kQK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const PackedBlockAt at = packed_block_at(n_blocks, b, kPackedQ8_0QuantBytes);
    uint8_t* q = group + at.quants;
    auto* scales = reinterpret_cast<uint16_t*>(group + at.scales);
    for (int r = 0; r < kPackRows; ++r) {
      const bool real = row0 + r < w.n_rows;
      const BlockQ8_0* block =
          real ? reinterpret_cast<const BlockQ8_0*>(w.data + (row0 + r) * w.row_stride) + b : nullptr;
      scales[r] = real ? block->d : 0;
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
  for (int64_t b = 0; b < n_blocks; ++b) {
    const PackedBlockAt at = packed_block_at(n_blocks, b, kPackedQ4_0QuantBytes);
    uint8_t* q = group + at.quants;
    auto* scales = reinterpret_cast<uint16_t*>(group + at.scales);
    for (int r = 0; r < kPackRows; ++r) {
      const bool real = row0 + r < w.n_rows;
      const BlockQ4_0* block =
          real ? reinterpret_cast<const BlockQ4_0*>(w.data + (row0 + r) * w.row_stride) + b : nullptr;
      scales[r] = real ? block->d : 0;
      for (int c = 0; c < kQK4_0 / 8; ++c) {
        for (int j = 0; j < 4; ++j) q[c * 32 + r * 4 + j] = real ? block->qs[4 * c + j] : 0x88;  // zero weights
      }
    }
  }
}

// MXFP4 as Q4_0 (packed.h): the codes in Q4_0's byte order, the tile looks their values up; the scale, half the E8M0
// one (mxfp4_scale_half), as the top 16 bits of its fp32, exact: a power of two, subnormal ones included, has no
// mantissa bits below them. Padded rows are code 0 (value 0) at scale 0.
void pack_group_mxfp4(const MatrixView& w, int64_t row0, uint8_t* group) {
  const int64_t n_blocks = w.n_cols / kQK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const PackedBlockAt at = packed_block_at(n_blocks, b, kPackedMXFP4QuantBytes);
    uint8_t* q = group + at.quants;
    auto* scales = reinterpret_cast<uint16_t*>(group + at.scales);
    for (int r = 0; r < kPackRows && row0 + r < w.n_rows; ++r) {
      const BlockMXFP4& block = reinterpret_cast<const BlockMXFP4*>(w.data + (row0 + r) * w.row_stride)[b];
      scales[r] = static_cast<uint16_t>(std::bit_cast<uint32_t>(mxfp4_scale_half(block.e)) >> 16);
      for (int c = 0; c < kQK8_0 / 8; ++c) {
        for (int j = 0; j < 4; ++j) q[c * 32 + r * 4 + j] = block.qs[4 * c + j];
      }
    }
  }
}

namespace {

// Q4_K and Q5_K super-block (packed.h): d, dmin, the unpacked scales [s][r], the mins [s/2][r][s%2], the quants,
// and for Q5_K the fifth bits of each four quant vectors in one vector.
template <class Block>
void pack_group_q4_k_q5_k(const MatrixView& w, int64_t row0, uint8_t* group) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  constexpr size_t kSuperBytes = kQ5 ? kPackedQ5_KSuperBytes : kPackedQ4_KSuperBytes;
  for (int64_t b = 0; b < w.n_cols / kQK_K; ++b) {
    uint8_t* super = group + b * kSuperBytes;
    auto* d = reinterpret_cast<uint16_t*>(super);
    auto* dmin = reinterpret_cast<uint16_t*>(super + 16);
    uint8_t* scales = super + 32;
    uint8_t* mins = super + 96;
    uint8_t* q = super + 160;
    for (int r = 0; r < kPackRows && row0 + r < w.n_rows; ++r) {
      const Block& block = reinterpret_cast<const Block*>(w.data + (row0 + r) * w.row_stride)[b];
      d[r] = block.d;
      dmin[r] = block.dmin;
      uint8_t sc[8];
      uint8_t m[8];
      unpack_q4_k_scales(block.scales, sc, m);
      for (int s = 0; s < 8; ++s) {
        scales[8 * s + r] = sc[s];
        mins[16 * (s / 2) + 2 * r + s % 2] = m[s];
      }
      for (int p = 0; p < 4; ++p) {
        for (int c = 0; c < 8; ++c) {
          for (int j = 0; j < 4; ++j) {
            const int i = 4 * c + j;  // the column inside sub-blocks 2p and 2p + 1
            q[256 * p + 32 * c + 4 * r + j] = block.qs[32 * p + i];
            if constexpr (kQ5) {
              // Bit s of qh[i] is the fifth bit of column i of sub-block s.
              const int k = c % 4;
              const int low = (block.qh[i] >> (2 * p)) & 1;
              const int high = (block.qh[i] >> (2 * p + 1)) & 1;
              super[1184 + 64 * p + 32 * (c / 4) + 4 * r + j] |=
                  static_cast<uint8_t>(low << (2 * k) | high << (2 * k + 1));
            }
          }
        }
      }
    }
  }
}

// The 256 unsigned 6-bit values of a Q6_K block in element order (quant.h).
void q6_k_values(const BlockQ6_K& block, uint8_t (&q)[kQK_K]) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = block.ql + 64 * half;
    const uint8_t* qh = block.qh + 32 * half;
    uint8_t* out = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 0x0F) | (qh[l] & 3) << 4);
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4);
      out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
  }
}

}  // namespace

void pack_group_q4_k(const MatrixView& w, int64_t row0, uint8_t* group) {
  pack_group_q4_k_q5_k<BlockQ4_K>(w, row0, group);
}

void pack_group_q5_k(const MatrixView& w, int64_t row0, uint8_t* group) {
  pack_group_q4_k_q5_k<BlockQ5_K>(w, row0, group);
}

// Q6_K super-block (packed.h): d, the scales [g][r], then per 16 columns two nibble vectors and one of high bits.
void pack_group_q6_k(const MatrixView& w, int64_t row0, uint8_t* group) {
  for (int64_t b = 0; b < w.n_cols / kQK_K; ++b) {
    uint8_t* super = group + b * kPackedQ6_KSuperBytes;
    auto* d = reinterpret_cast<uint16_t*>(super);
    auto* scales = reinterpret_cast<int8_t*>(super + 16);
    for (int r = 0; r < kPackRows && row0 + r < w.n_rows; ++r) {
      const BlockQ6_K& block = reinterpret_cast<const BlockQ6_K*>(w.data + (row0 + r) * w.row_stride)[b];
      d[r] = block.d;
      uint8_t values[kQK_K];
      q6_k_values(block, values);
      for (int g = 0; g < 16; ++g) {
        scales[8 * g + r] = block.scales[g];
        uint8_t* q = super + 160 + 96 * g;
        for (int j = 0; j < 4; ++j) {
          const uint8_t* value = values + 16 * g + j;  // value[4k]: quad k's column j
          q[4 * r + j] = static_cast<uint8_t>((value[0] & 0x0F) | (value[4] & 0x0F) << 4);
          q[32 + 4 * r + j] = static_cast<uint8_t>((value[8] & 0x0F) | (value[12] & 0x0F) << 4);
          q[64 + 4 * r + j] =
              static_cast<uint8_t>(value[0] >> 4 | (value[4] >> 4) << 2 | (value[8] >> 4) << 4 | (value[12] >> 4) << 6);
        }
      }
    }
  }
}

// Q3_K super-block (packed.h): d, the signed scales sc − 32 [g][r], then per 32 columns the 3-bit values of 8 column
// quads in three vectors. Each value is the reference's q in [-4, 3] plus 4: low 2 bits | high bit << 2.
void pack_group_q3_k(const MatrixView& w, int64_t row0, uint8_t* group) {
  for (int64_t b = 0; b < w.n_cols / kQK_K; ++b) {
    uint8_t* super = group + b * kPackedQ3_KSuperBytes;
    auto* d = reinterpret_cast<uint16_t*>(super);
    auto* scales = reinterpret_cast<int8_t*>(super + 16);
    for (int r = 0; r < kPackRows && row0 + r < w.n_rows; ++r) {
      const BlockQ3_K& block = reinterpret_cast<const BlockQ3_K*>(w.data + (row0 + r) * w.row_stride)[b];
      d[r] = block.d;
      uint8_t sc[16];
      unpack_q3_k_scales(block.scales, sc);
      for (int g = 0; g < 16; ++g) scales[8 * g + r] = static_cast<int8_t>(sc[g] - 32);
      for (int e = 0; e < kQK_K; ++e) {
        // Element e = 128n + 32j + l (quant.h).
        const int low = (block.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const int high = (block.hmask[e % 32] >> (e / 32)) & 1;
        const int q = low | high << 2;
        const int v = (e % 32) / 4;  // column quad v of the pair: quad v % 4 of group 2(e / 32) + v / 4
        uint8_t* at = super + 160 + 96 * (e / 32) + 4 * r + e % 4;
        if (v < 6) {
          at[32 * (v / 2)] |= static_cast<uint8_t>(q << (3 * (v % 2)));
        } else {
          at[v == 6 ? 0 : 64] |= static_cast<uint8_t>((q & 3) << 6);
          at[32] |= static_cast<uint8_t>((q >> 2) << v);
        }
      }
    }
  }
}

// IQ4_XS super-block (packed.h): d, the signed scales sc − 32 [s][r], then the codebook indices in Q4_K's order: a
// byte holds column i of sub-blocks 2p and 2p + 1 in its low and high nibble.
void pack_group_iq4_xs(const MatrixView& w, int64_t row0, uint8_t* group) {
  for (int64_t b = 0; b < w.n_cols / kQK_K; ++b) {
    uint8_t* super = group + b * kPackedIQ4_XSSuperBytes;
    auto* d = reinterpret_cast<uint16_t*>(super);
    auto* scales = reinterpret_cast<int8_t*>(super + 16);
    uint8_t* q = super + 96;
    for (int r = 0; r < kPackRows && row0 + r < w.n_rows; ++r) {
      const BlockIQ4_XS& block = reinterpret_cast<const BlockIQ4_XS*>(w.data + (row0 + r) * w.row_stride)[b];
      d[r] = block.d;
      // Sub-block s is one IQ4_NL block: qs[16s + i] holds its column i (low nibble) and 16 + i (high nibble).
      uint8_t index[kQK_K];
      for (int s = 0; s < 8; ++s) {
        scales[8 * s + r] = static_cast<int8_t>(iq4_xs_scale(block, s) - 32);
        for (int i = 0; i < 16; ++i) {
          index[32 * s + i] = block.qs[16 * s + i] & 0x0F;
          index[32 * s + 16 + i] = block.qs[16 * s + i] >> 4;
        }
      }
      for (int p = 0; p < 4; ++p) {
        for (int c = 0; c < 8; ++c) {
          for (int j = 0; j < 4; ++j) {
            const int i = 4 * c + j;
            q[256 * p + 32 * c + 4 * r + j] = static_cast<uint8_t>(index[64 * p + i] | index[64 * p + 32 + i] << 4);
          }
        }
      }
    }
  }
}

}  // namespace hearth::kernels

namespace hearth {
namespace {

constexpr size_t kAlignment = 64;

}  // namespace

bool packing_available(DType type) {
  if (detected_isa_level() < IsaLevel::kAvx2) return false;
  const kernels::WeightType* row = kernels::find_weight_type(type);
  return row != nullptr && row->packed != nullptr;
}

namespace {

// The packed layout of `type`; aborts when it has none.
const kernels::PackedLayout& packed_layout(DType type) {
  const kernels::WeightType* row = kernels::find_weight_type(type);
  HEARTH_CHECK(row != nullptr && row->packed != nullptr, "pack_matrix: no packed layout for {}", dtype_name(type));
  return *row->packed;
}

// Bytes of one group of kPackRows rows before the padding to a cache line.
size_t unpadded_group_bytes(const kernels::PackedLayout& layout, int64_t n_cols) {
  return static_cast<size_t>(n_cols / layout.unit_cols) * layout.unit_bytes;
}

// A decode token streams every packed matrix once; on 2 MiB pages (transparent huge pages, which most distributions
// grant on request: "madvise" mode) it takes far fewer TLB misses than on 4 KiB ones, and decodes faster
// (docs/performance-log.md, "On a machine without AVX-VNNI"). The storage starts on a 2 MiB boundary and only its whole
// 2 MiB pages are offered, so a small matrix, or a large one's tail, stays on 4 KiB pages and costs no more memory.
HugePagesBuffer allocate_storage(size_t bytes) {
  HugePagesBuffer storage = allocate_on_huge_pages(bytes, kAlignment);
  HEARTH_CHECK(storage != nullptr, "pack_matrix: out of memory for {} bytes", bytes);
  return storage;
}

}  // namespace

size_t packed_group_bytes(DType type, int64_t n_cols) {
  return (unpadded_group_bytes(packed_layout(type), n_cols) + kAlignment - 1) / kAlignment * kAlignment;
}

size_t packed_matrix_bytes(DType type, int64_t n_rows, int64_t n_cols) {
  return packed_group_bytes(type, n_cols) * static_cast<size_t>((n_rows + kPackRows - 1) / kPackRows);
}

std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w) {
  HEARTH_CHECK(packing_available(w.type), "pack_matrix: no packed layout for {}", dtype_name(w.type));
  HEARTH_CHECK(w.n_cols % dtype_info(w.type).block_size == 0 && w.n_rows >= 0, "pack_matrix: bad shape");
  const kernels::PackedLayout& layout = packed_layout(w.type);
  auto p = std::make_unique<PackedMatrix>();
  p->type = w.type;
  p->n_rows = w.n_rows;
  p->n_cols = w.n_cols;
  // Groups start on a cache line: Q8_0/Q4_0 quant blocks are 256 or 128 bytes, so each stays inside its own lines;
  // K-quant super-blocks are multiples of 32 bytes, so no 32-byte load splits a line.
  p->group_bytes = packed_group_bytes(w.type, w.n_cols);
  p->storage = allocate_storage(p->bytes());
  p->data = p->storage.get();
  for (int64_t g = 0; g < p->n_groups(); ++g) {
    uint8_t* group = p->data + static_cast<size_t>(g) * p->group_bytes;
    std::memset(group, 0, p->group_bytes);
    layout.pack_group(w, g * kPackRows, group);
  }
  return p;
}

}  // namespace hearth

namespace hearth::kernels {
namespace {

// Per Q8_0 block of x: -offset·Σx (the offset of the packed weights), then the block's scale as fp32 bits.
template <int32_t kOffset>
void corrections_per_block(const uint8_t* x, int64_t n_cols, int32_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(x);
  for (int64_t b = 0; b < n_cols / kQK8_0; ++b) {
    int32_t sum = 0;
    for (int i = 0; i < kQK8_0; ++i) sum += blocks[b].qs[i];
    out[2 * b] = -kOffset * sum;
    // The scale as fp32 (exact), so the tiles broadcast it with a load instead of converting it per row group.
    out[2 * b + 1] = std::bit_cast<int32_t>(fp16_to_fp32(blocks[b].d));
  }
}

// Per Q8_K super-block of x: -offset·bsums[g] for each 16 elements.
template <int32_t kOffset>
void corrections_per_16(const uint8_t* x, int64_t n_cols, int32_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(x);
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    for (int g = 0; g < 16; ++g) out[16 * b + g] = -kOffset * blocks[b].bsums[g];
  }
}

}  // namespace

void packed_corrections_q8_0(const uint8_t* x, int64_t n_cols, int32_t* out) {
  corrections_per_block<128>(x, n_cols, out);
}

void packed_corrections_q4_0(const uint8_t* x, int64_t n_cols, int32_t* out) {
  corrections_per_block<8>(x, n_cols, out);
}

void packed_corrections_q4_k_q5_k(const uint8_t* x, int64_t n_cols, int32_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(x);
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    const int16_t* bsums = blocks[b].bsums;
    for (int k = 0; k < 4; ++k) {
      // |bs| <= 32·127: each fits an int16.
      const int lo = bsums[4 * k] + bsums[4 * k + 1];
      const int hi = bsums[4 * k + 2] + bsums[4 * k + 3];
      out[4 * b + k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                            (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
    }
  }
}

void packed_corrections_q6_k(const uint8_t* x, int64_t n_cols, int32_t* out) {
  corrections_per_16<32>(x, n_cols, out);
}

void packed_corrections_q3_k(const uint8_t* x, int64_t n_cols, int32_t* out) {
  corrections_per_16<4>(x, n_cols, out);
}

void packed_corrections_iq4_xs(const uint8_t* x, int64_t n_cols, int32_t* out) {
  const auto* blocks = reinterpret_cast<const BlockQ8_K*>(x);
  for (int64_t b = 0; b < n_cols / kQK_K; ++b) {
    const int16_t* bsums = blocks[b].bsums;
    for (int s = 0; s < 8; ++s) out[8 * b + s] = -128 * (bsums[2 * s] + bsums[2 * s + 1]);
  }
}

void packed_corrections_mxfp4(const uint8_t* x, int64_t n_cols, int32_t* out) {
  corrections_per_block<kPackedMXFP4Offset>(x, n_cols, out);
}

int64_t packed_correction_count(DType weight_type, int64_t n_cols) {
  const WeightType* row = find_weight_type(weight_type);
  if (row == nullptr || row->packed == nullptr) return 0;
  return n_cols / row->packed->unit_cols * row->packed->corrections_per_unit;
}

}  // namespace hearth::kernels

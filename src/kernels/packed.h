#pragma once
// Weight matrices repacked at load for the packed tiles (packed_tiles.inc): AVX-VNNI ones (IsaLevel::kAvxVnni,
// vec_dot_avxvnni_packed.cpp) and AVX2 ones with the same layout (IsaLevel::kAvx2, vec_dot_avx2_packed.cpp).
//
// The row-major GGUF layout makes every output one horizontal reduction per block (8 int32 lanes of one row to one
// sum), and those reductions and the float step per block and row cost more than the products. A packed matrix
// interleaves 8 rows four columns at a time, so one vpdpbusd multiplies four columns of 8 rows by the same four
// activation bytes and leaves each row's block sum in its own lane: no horizontal work at all.
//
// Layout of Q8_0, Q4_0 and MXFP4, per group of 8 rows (the last group padded with zero-scale rows), n_blocks =
// n_cols / 32: blocks in pairs, [quants b][quants b + 1][scales b][scales b + 1], an odd last block alone,
// [quants][scales] (packed_block_at, vec_dot.h), where
//   quants [kQuantBytes]   block b's 8 rows × 32 columns, see below
//   scales [8] fp16        row r's scale of block b (MXFP4: bf16)
// Each group is then one stream, read front to back, not two (quants, then scales at the group's end): decode's Q8_0
// matmuls stream faster that way (docs/performance-log.md, "Q8_0 groups as one stream").
// Q8_0: 256 bytes per block; byte c·32 + r·4 + j is row r's column 4c + j (c < 8) plus 128, as an unsigned byte.
// Q4_0: 128 bytes per block; byte c·32 + r·4 + j is row r's original byte 4c + j (c < 4): its low nibble is column
//       4c + j plus 8, its high nibble column 16 + 4c + j plus 8.
// MXFP4: Q4_0's 128 bytes per block, each nibble the E2M1 code of the same column (not a value plus 8), and per row
//       the half E8M0 scale (mxfp4_scale_half) as bf16, the top half of its fp32: exact for every exponent, the
//       subnormal half-scales of e 0 and 1 included, and as small as Q4_0's fp16. The tile looks each code up
//       (vpshufb) as its table value plus 12 (kPackedMXFP4Offset), 0 to 24.
// The unsigned weights are the vpdpbusd operand that must be unsigned; the +128 / +8 / +12 offsets are taken back
// exactly with the activation block's Σx (packed_corrections_q8_0, _q4_0, _mxfp4 in vec_dot.h), so every block's
// integer sum is the exact Σ w·x.
//
// The K-quants keep one record per 256-column super-block b of the group, all bytes of the 8 rows together
// (kPacked*_KSuperBytes: multiples of 32, so every 32-byte load stays aligned):
// Q4_K, 1184 bytes (148 per row, the original 144):
//   [0, 16)      d[8] fp16            [16, 32)  dmin[8] fp16
//   [32, 96)     byte 8s + r: row r's 6-bit scale of sub-block s (unpack_q4_k_scales)
//   [96, 160)    byte 16k + 2r + h: row r's 6-bit min of sub-block 2k + h (an int16 pair per row for vpdpwssd)
//   [160, 1184)  byte 256p + 32c + 4r + j: row r's original qs[32p + 4c + j]; its low nibble is column 64p + 4c + j
//                (sub-block 2p), its high nibble column 64p + 32 + 4c + j (sub-block 2p + 1), already unsigned.
// Q5_K, 1440 bytes (180 per row, the original 176): Q4_K's 1184 bytes with its scales, mins and nibbles, then
//   [1184, 1440) byte 1184 + 64p + 32(c/4) + 4r + j: bits 2(c%4) and 2(c%4) + 1 the fifth bits of the low and the
//                high nibble of quant byte 256p + 32c + 4r + j, so one load serves four quant vectors.
// Q6_K, 1696 bytes (212 per row, the original 210): q the unsigned 6-bit value, the reference's q − 32 plus 32.
//   [0, 16)      d[8] fp16            [16, 144)  byte 8g + r: row r's int8 scale of columns [16g, 16g + 16)
//   [144, 160)   zero
//   [160 + 96g, 160 + 96(g+1))  columns [16g, 16g + 16) as column quads k (columns 16g + 4k + j):
//                byte 4r + j: low nibble q's low 4 bits of quad 0, high nibble those of quad 1;
//                byte 32 + 4r + j: the same for quads 2 and 3;
//                byte 64 + 4r + j: bits 2k, 2k + 1 the top 2 bits of q of quad k.
// Q3_K, 928 bytes (116 per row, the original 110): q the unsigned 3-bit value, the reference's q in [-4, 3] plus 4.
//   [0, 16)      d[8] fp16            [16, 144)  byte 8g + r: row r's scale of columns [16g, 16g + 16) minus 32, int8
//   [144, 160)   zero
//   [160 + 96P, 160 + 96(P+1))  columns [32P, 32P + 32) as column quads v (columns 32P + 4v + j, quad v % 4 of
//                group 2P + v / 4), three bytes A, B, C at 4r + j, 32 + 4r + j, 64 + 4r + j holding row r's 8 values:
//                A: v0 in bits 0-2, v1 in 3-5, the low 2 bits of v6 in 6-7;  B: v2, v3, the top bits of v6 and v7;
//                C: v4, v5, the low 2 bits of v7. Six values take one or two instructions to extract, not five.
// IQ4_XS, 1120 bytes (140 per row, the original 136): the 4-bit codebook indices, looked up by the tile.
//   [0, 16)      d[8] fp16            [16, 80)  byte 8s + r: row r's scale of sub-block s minus 32, int8
//   [80, 96)     zero
//   [96, 1120)   byte 256p + 32c + 4r + j: low nibble the index of column 64p + 4c + j (sub-block 2p), high nibble
//                that of column 64p + 32 + 4c + j (sub-block 2p + 1), Q4_K's order (not the original's).
// The Q6_K offset of 32 (Q3_K's of 4) is taken back with the activation's Σx per 16 columns (−32·bsums, −4·bsums), the
// Q4_K and Q5_K mins need the activation's Σx per 32 columns: both come from the packed corrections too
// (packed_corrections_*, vec_dot.h).
//
// The mapped original stays the weight of record (the cache fingerprint hashes it, other ISA levels read it); the
// packed copy is extra anonymous memory of about the size of the original matrix (6% more for MXFP4, 5% for Q3_K, 3%
// for Q4_K and IQ4_XS, 2% for Q5_K, 1% for Q6_K).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/matmul.h"
#include "tensor/dtype.h"
#include "util/huge_pages.h"

namespace hearth {

inline constexpr int kPackRows = 8;

struct PackedMatrix {
  DType type = DType::Q8_0;  // the original type: one that packing_available accepts
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t group_bytes = 0;  // bytes of one group of kPackRows rows
  // Anonymous memory on 2 MiB boundaries, offered to the kernel for transparent huge pages (util/huge_pages.h).
  HugePagesBuffer storage;
  uint8_t* data = nullptr;  // 64-byte aligned, inside storage

  int64_t n_groups() const { return (n_rows + kPackRows - 1) / kPackRows; }
  size_t bytes() const { return group_bytes * static_cast<size_t>(n_groups()); }
};

// True when weights of this type have a packed layout and this CPU has the ISA its tiles need (AVX2).
bool packing_available(DType type);

// Bytes of one group of kPackRows packed rows of n_cols columns, and of a whole packed matrix (PackedMatrix::bytes
// of pack_matrix's result): what memory estimates count before anything is packed.
[[nodiscard]] size_t packed_group_bytes(DType type, int64_t n_cols);
[[nodiscard]] size_t packed_matrix_bytes(DType type, int64_t n_rows, int64_t n_cols);

// The packed copy of `w` (requires packing_available(w.type)), for MatrixView::packed of a view of the same rows.
std::unique_ptr<PackedMatrix> pack_matrix(const MatrixView& w);

// How far ahead of its loads each of a decode tile's two group streams asks for its weights (prefetcht0), for the
// 512-bit packed tiles (1 to 3 tokens, two groups: vec_dot_avx512vnni_packed.cpp); 0: not at all. No bit depends on it:
// it is speed only, and which is faster depends on the CPU and the row length.
//
// One tile ahead (2 × group_bytes) leaves about 2 × group_bytes asked for and not yet read in each stream. When
// 4 × group_bytes exceed the L1D, lines are evicted before their loads reach them, and the hardware prefetchers
// alone stream faster than that; where the bytes fit, the fetches one tile ahead pay. Past the L1D, a short distance
// (kDecodeNearFetchBytes) beats both: the L2 streamer already has the lines close, and the fetch only moves them
// into the L1 before the loads. The runs behind this rule, on CPUs with 48 KiB of L1D and 1 or 2 MiB of L2, are in
// docs/performance-log.md ("Q8_0 groups as one stream" and "decode's near fetches on every CPU").
enum class DecodePrefetch {
  kAuto,       // kNear: the best policy wherever it was compared (docs/performance-log.md)
  kTileAhead,  // always one tile ahead
  kWithinL1,   // one tile ahead when 4 × group_bytes fit the L1D (sysconf; 32 KiB when it does not say), else never
  kNear,       // one tile ahead when 4 × group_bytes fit the L1D, else kDecodeNearFetchBytes ahead
  kNone,       // never
};

// kNear's distance past the L1D: 1.5 to 3 KiB ahead all beat fetching nothing, 4 KiB did not, and 2 KiB is the
// middle of that range (docs/performance-log.md, "Q8_0 groups as one stream").
inline constexpr size_t kDecodeNearFetchBytes = 2048;

// The policy starts as HEARTH_DECODE_PREFETCH=auto|tile|l1|near|none (any other value aborts naming it; unset: auto).
// Tests and benchmarks set it; not synchronized with running kernels: call it between kernel calls.
void set_decode_prefetch(DecodePrefetch policy);
DecodePrefetch decode_prefetch();
// "auto", "tile", "l1", "near" or "none", as HEARTH_DECODE_PREFETCH names them.
const char* decode_prefetch_name(DecodePrefetch policy);

// Bytes ahead that a decode tile over groups of group_bytes fetches under the current policy (0: none).
size_t decode_fetch_distance(size_t group_bytes);

}  // namespace hearth

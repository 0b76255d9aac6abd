#pragma once
// How attention's kernels find a span's K/V rows in the paged pool (internal to the kernels library).

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/kv_convert.h"

namespace hearth::kernels {

inline constexpr int32_t kMaxSpan = 64;

// The first key a query at `pos` reads.
inline int32_t first_key_of(const AttentionTile& t, int32_t pos) {
  return t.window > 0 ? std::max(0, pos - t.window + 1) : 0;
}

// rows[j] = PagedKvView::head(key0 + j, kv_head) for j < n, one block-table lookup per block.
inline void head_rows(const PagedKvView& kv, int32_t kv_head, int32_t key0, int32_t n, const uint8_t** rows) {
  const int32_t bs = kv.block_size;
  for (int32_t pos = key0, end = key0 + n; pos < end;) {
    const int32_t slot = pos % bs;
    const int32_t take = std::min(bs - slot, end - pos);
    const uint8_t* row = kv.head(pos, kv_head);
    for (int32_t i = 0; i < take; ++i, row += kv.slot_stride) rows[pos - key0 + i] = row;
    pos += take;
  }
}

// Asks for the cache line at p: into L1 (prefetcht0), or into L2 only (prefetcht1) with kToL2. Inline asm rather
// than _mm_prefetch, because GCC 12 at -O2 deletes a loop nest whose only statements are _mm_prefetch calls:
// attention's span prefetches compiled to nothing that way (objdump showed none in attention.o) until this.
template <bool kToL2>
inline void prefetch_line(const uint8_t* p) {
  if constexpr (kToL2) {
    asm volatile("prefetcht1 %0" : : "m"(*p));
  } else {
    asm volatile("prefetcht0 %0" : : "m"(*p));
  }
}

// Asks for the first `bytes` of rows[0..n) into L2.
inline void fetch_rows_to_l2(const uint8_t* const* rows, int32_t n, size_t bytes) {
  for (int32_t j = 0; j < n; ++j) {
    for (size_t off = 0; off < bytes; off += 64) prefetch_line<true>(rows[j] + off);
  }
}

// Asks for the head slices of keys [key0, key0 + n) into L2.
inline void fetch_span_to_l2(const PagedKvView& kv, int32_t kv_head, int32_t key0, int32_t n) {
  const uint8_t* rows[kMaxSpan];
  head_rows(kv, kv_head, key0, n, rows);
  fetch_rows_to_l2(rows, n, kv.head_bytes);
}

// Points rows[j] at key (or value) key0 + j's head slice as floats: straight into storage for f32, otherwise
// dequantized into `tile`.
inline void load_tile(const PagedKvView& kv, int32_t kv_head, int32_t key0, int32_t n, int32_t hd, float* tile,
                      const float** rows) {
  const uint8_t* src[kMaxSpan];
  head_rows(kv, kv_head, key0, n, src);
  if (kv.dtype == KvDtype::kF32) {
    for (int32_t j = 0; j < n; ++j) rows[j] = reinterpret_cast<const float*>(src[j]);
    return;
  }
  kv_dequantize_rows(kv.dtype, src, n, tile, hd);
  for (int32_t j = 0; j < n; ++j) rows[j] = tile + static_cast<size_t>(j) * hd;
}

}  // namespace hearth::kernels

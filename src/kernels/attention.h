#pragma once
// Causal attention over paged, possibly quantized K/V, flash style: keys are visited one span (attention_span keys)
// at a time with an online softmax, so no n×n score matrix is ever formed and each span's K/V is dequantized once
// for every query that reads it.
//
// Per query, the arithmetic is a fixed function of its position and the head size alone: spans are absolute key
// ranges, keys within a span go in order, and the running (max, sum, accumulator) is updated span by span. How
// many queries share a call, which thread runs them, how a prompt was chunked and the KV block size never change a
// result bit.

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/kv_dtype.h"
#include "util/ids.h"

namespace hearth {

// K or V of one layer stored in fixed-size blocks of block_size tokens. KV head h's slice of position p lives at
//   base + block_table[p / block_size] * block_stride + (p % block_size) * slot_stride + h * head_stride   (bytes)
// (head_bytes long). The pool keeps a head's slices of a block together (slot_stride = head_bytes, head_stride =
// block_size × head_bytes), so a tile that reads one head walks a few contiguous runs per block, not one slice a
// whole row apart per key.
struct PagedKvView {
  const uint8_t* base = nullptr;
  size_t block_stride = 0;
  size_t slot_stride = 0;
  int32_t block_size = 0;
  std::span<const BlockId> block_table;
  KvDtype dtype = KvDtype::kF32;
  size_t head_bytes = 0;
  size_t head_stride = 0;

  const uint8_t* head(int32_t pos, int32_t kv_head) const {
    return base + static_cast<size_t>(block_table[pos / block_size].value) * block_stride +
           static_cast<size_t>(pos % block_size) * slot_stride + head_stride * kv_head;
  }
};

// n_rows consecutive query rows of one sequence, at positions first_pos, first_pos + 1, ..., for the n_kv_heads
// KV heads kv_head, kv_head + 1, ..., each read by n_q_heads query heads (GQA group). Query head g of KV head
// kv_head + h in row r is
//   q + r × q_stride + (h × n_q_heads + g) × head_dim,  and its output goes to out + the same offset (out_stride).
// Several KV heads in one tile are visited span by span together, so a decode step streams neighbouring heads'
// runs of each block one after another.
// Row r attends to keys [0, first_pos + r], or with a window W > 0 to the last W of them,
// [max(0, first_pos + r - W + 1), first_pos + r] (sliding-window layers; older keys are skipped, never read).
// Scores are (q · k) × scale, then, with softcap > 0, softcap × tanh(score / softcap) (Gemma 2).
struct AttentionTile {
  const float* q = nullptr;
  size_t q_stride = 0;
  float* out = nullptr;
  size_t out_stride = 0;
  int32_t n_rows = 0;
  int32_t first_pos = 0;
  int32_t n_q_heads = 1;
  int32_t kv_head = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;
  int32_t window = 0;    // 0: causal over every earlier key
  float softcap = 0.0f;  // 0: none
  int32_t n_kv_heads = 1;
  // gpt-oss: a sink logit per query head of the tile (n_q_heads × n_kv_heads, in the tile's head order), which
  // joins each softmax's denominator with no value: out = Σ exp(s_j - m) v_j / (Σ exp(s_j - m) + exp(sink - m)).
  // nullptr: none.
  const float* sinks = nullptr;
};

// Keys per online-softmax step for a head size: 64 for head size 64, fewer for larger heads (32 at 128, 16 at 256)
// so that a span's K and V as floats stay in L1 (2 × 16 KiB); always a multiple of 8 in [16, 64].
int32_t attention_span(int32_t head_dim);

// Floats of scratch attention_tile needs for a tile of n_rows rows of n_query_heads query heads each (all its KV
// heads together: n_q_heads × n_kv_heads).
size_t attention_scratch_floats(int32_t head_dim, int32_t n_rows, int32_t n_query_heads);

void attention_tile(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, float* scratch);

// How the AVX2 path reads f16 K/V: converted in registers at every load (kInPlace), or converted to floats once per
// span and then read as floats (kDequantized). The conversion is exact, so both give the same bits; which is faster
// depends on the CPU. kAuto (the default) dequantizes on Zen 1 (cpu_is_zen1) for tiles of at least
// kF16DequantizeMinQueries queries per KV head and reads in place otherwise. Tests and benchmarks pin one; not
// synchronized with running kernels.
enum class F16KvReads { kAuto, kInPlace, kDequantized };
void set_f16_kv_reads(F16KvReads reads);

// Where Zen 1 turns from reading in place to dequantizing first: from 8 queries per KV head up, dequantized tiles
// are faster, below it in-place ones (docs/performance-log.md, "f16 attention on Zen 1").
inline constexpr int32_t kF16DequantizeMinQueries = 8;

// Twin: two-pass softmax in double precision per query, K/V read through the reference dequantizer.
void attention_tile_reference(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v);

// The exp of attention's softmax on n values at the active ISA level (for tests): bitwise the same at every level,
// within 2 ulp of std::exp on [-87, 0], 0 below -87.3.
void attention_exp(const float* x, float* y, int64_t n);

}  // namespace hearth

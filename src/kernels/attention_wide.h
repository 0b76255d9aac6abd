#pragma once
// Attention's wide path (internal to the kernels library): many queries of one KV head over every span of keys,
// with the queries across the lanes of 512-bit vectors (16 per vector) instead of the head dimensions. A score then
// needs no horizontal sum and each key element is one broadcast shared by 16 queries. In the causal spans at the
// end (keys up to the tile's own rows), each lane reads only the keys up to its query's position.
//
// Per query, every operation is the one attention.cpp's per-query steps perform, in the same order (the score's
// 8 lanes over the dimensions and their combination, the softmax step's max, exp and 8-lane sum, one fma per key
// in the value sum), so a query gets the same bits on either path.

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"

namespace hearth::kernels {

// exp(x) for the softmax, whose arguments are <= 0: Cephes' expf polynomial after a two-constant ln 2 reduction.
// Every ISA level computes it with these constants and the same operations in the same order.
inline constexpr float kExpMin = -87.3f;
inline constexpr float kExpMax = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline constexpr int32_t kWideLanes = 16;
inline constexpr int32_t kWideMaxHeadDim = 256;
inline constexpr int32_t kWideMaxSpan = 64;

// Queries in transposed form, kWideLanes to a group: element (d, lane) of a group's q and acc at
// [d × kWideLanes + lane]; m and l one per lane. Lanes past the last query hold zeros and are never read back.
// `visible` (nullptr: every lane reads the whole span): per lane, how many of the span's first keys its query reads
// (a causal span: the keys after a query's position are not its to read; 0 to n). A lane then performs exactly the
// per-query steps over those keys: the scores of the rest are never maxed, summed or accumulated, and a lane that
// reads none keeps its state bit for bit.
struct WideGroup {
  const float* qt;                   // head_dim × kWideLanes
  float* acct;                       // head_dim × kWideLanes, the unnormalized output
  float* m;                          // kWideLanes
  float* l;                          // kWideLanes
  const int32_t* visible = nullptr;  // kWideLanes, or nullptr
};

// The stored K and V head slices of a later span's n keys (k_bytes and v_bytes long), for the span in use to ask
// for into L2 a few keys at a time as it goes, so that the requests spread over the span.
struct WideAhead {
  const uint8_t* const* k = nullptr;
  const uint8_t* const* v = nullptr;
  int32_t n = 0;
  size_t k_bytes = 0;
  size_t v_bytes = 0;
};

// One span of n keys (n a multiple of 8, at most kWideMaxSpan) for n_groups (1 or 2) groups whose every query
// reads all of them, or (the groups' `visible`) its first few: k[j] and v[j] are key j's head slices as floats, or
// as f16 (bytes, converted exactly as kv_dequantize_rows converts them), each a readable row even past the last key
// any lane reads; pt is n_groups × n × kWideLanes floats of scratch (64-byte aligned, like the
// groups' arrays); head_dim is a multiple of 16, at most kWideMaxHeadDim. Two groups go through together and
// share every load of a key or value element; each gets the bits it gets alone. Needs AVX-512 F.
// `ahead` (n = 0: none): the K and V head slices of a later span, asked for into L2 8 keys at a time as the
// scores go.
void wide_attend_span_avx512(const WideGroup* groups, int32_t n_groups, const float* const* k, const float* const* v,
                             int32_t n, int32_t head_dim, float scale, float* pt, const WideAhead& ahead);
void wide_attend_span_f16_avx512(const WideGroup* groups, int32_t n_groups, const uint8_t* const* k,
                                 const uint8_t* const* v, int32_t n, int32_t head_dim, float scale, float* pt,
                                 const WideAhead& ahead);

// attention.cpp's accumulate_rows and accumulate_rows2 for f16 value rows (bytes) on 512-bit vectors, with the same
// bits: head size a multiple of 16. Need AVX-512 F.
void accumulate_rows_f16_avx512(float* acc, float corr, const float* p, const uint8_t* const* v, int32_t n,
                                int32_t hd);
void accumulate_rows2_f16_avx512(float* acc0, float corr0, const float* p0, float* acc1, float corr1, const float* p1,
                                 const uint8_t* const* v, int32_t n, int32_t hd);

// Floats of scratch the wide path needs beside attention_tile's own for a tile of n_queries queries (at most that
// many per KV head), 64-byte alignment included.
size_t wide_scratch_floats(int32_t span, int32_t head_dim, int32_t n_queries);

// Two float tiles of span × head_dim (K and V rows of dtypes other than f32 and f16, dequantized) and the area of
// wide_scratch_floats.
struct WideScratch {
  float* k_tile;
  float* v_tile;
  float* area;
};

// Every span of the tile's keys through the wide path, when the AVX-512 level is active, no window cuts them, there
// is no softcap and the tile has enough queries per KV head: the spans every query reads whole, then the causal
// ones (the last span or two, which each query reads up to its own position) with each lane's visible keys.
// Leaves each query's (m, l, acc) in state_* (row-major over rows, then heads, as attention_tile keeps them) as the
// per-query path would, and returns the key the per-query path goes on from: past the tile's last key, or 0 when
// the wide path took nothing.
int32_t attend_prefix_wide(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, int32_t span,
                           const WideScratch& scratch, float* state_m, float* state_l, float* state_acc);

}  // namespace hearth::kernels

// Attention's wide path, the tile side (attention_wide.h): which spans it takes, the queries and their running
// state in transposed form, and the K/V rows of each span; the arithmetic is in attention_avx512.cpp.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention_rows.h"
#include "kernels/attention_wide.h"
#include "kernels/cpu_isa.h"

namespace hearth::kernels {
namespace {

// Queries of one KV head below which the per-query path is faster than a wide group's 16 lanes: a wide group costs
// about the same from 8 to 12 queries, the per-query path grows with them and crosses it near 10
// (docs/performance-log.md, "attention's wide path and the head-major pool").
constexpr int32_t kWideMinQueries = 10;

// How far ahead attend_spans asks for K/V rows, in spans (into L2 only: the 48 KiB L1 already holds the span in use,
// the groups' arrays and the buffers). A head's slices of a span lie on ~8 of the pool's 4 KiB pages; without
// prefetches the first conversion of each 8 keys' f16 rows waits on them (a profile puts a large share of the score
// step's samples there). With K/V from L3, 2 spans ahead into L2 beat none, 1 span into L1 is the same and 3 spans
// slower; with a head's K/V in L2 already, the fetches change nothing beyond the runs' spread, and some CPUs gain
// nothing from them (docs/performance-log.md, "attention's wide path in pairs of groups"). The requests go out 8 keys
// at a time as the first pair of groups scores the span in use (WideAhead), not all at its start, where the span's 256
// lines would queue at once behind the loads the span needs itself; spread that way, 2 spans ahead stays best with K/V
// from memory (docs/performance-log.md, "K/V fetched ahead from memory").
constexpr int32_t kWideAheadSpans = 2;

// One KV head's queries in transposed form (attention_wide.h), carved from the 64-byte aligned wide area: query i
// of the head (row i / n_q_heads, query head i % n_q_heads) is lane i % 16 of group i / 16.
struct HeadGroups {
  int32_t groups, hd;
  float *qt, *acct, *m, *l;
  int32_t* visible;  // groups × kWideLanes: the keys of the causal span in use each lane reads
  float* pt;

  HeadGroups(float* area, int32_t n_queries, int32_t head_dim) : hd(head_dim) {
    groups = (n_queries + kWideLanes - 1) / kWideLanes;
    auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(area) + 63) & ~uintptr_t{63});
    qt = base;
    acct = qt + groups * floats();
    m = acct + groups * floats();
    l = m + static_cast<size_t>(groups) * kWideLanes;
    visible = reinterpret_cast<int32_t*>(l + static_cast<size_t>(groups) * kWideLanes);
    pt = reinterpret_cast<float*>(visible + static_cast<size_t>(groups) * kWideLanes);
  }
  size_t floats() const { return static_cast<size_t>(hd) * kWideLanes; }
  size_t lane(int32_t i) const { return static_cast<size_t>(i / kWideLanes) * kWideLanes + i % kWideLanes; }
  float* at(float* base, int32_t i, int32_t d) const {
    return base + (i / kWideLanes) * floats() + static_cast<size_t>(d) * kWideLanes + i % kWideLanes;
  }
  WideGroup group(int32_t g, bool causal) const {
    return {qt + g * floats(), acct + g * floats(), m + g * kWideLanes, l + g * kWideLanes,
            causal ? visible + g * kWideLanes : nullptr};
  }
};

// Index of query i of KV head h in the tile's per-query state (row-major over rows, then heads).
int32_t query_index(const AttentionTile& t, int32_t h, int32_t i) {
  return (i / t.n_q_heads) * t.n_q_heads * t.n_kv_heads + h * t.n_q_heads + i % t.n_q_heads;
}

// KV head h's queries into the groups, with the state a query starts from (m = -inf, l = 0, acc = 0).
void load_queries(const AttentionTile& t, int32_t h, const HeadGroups& hg) {
  const int32_t per_row = t.n_q_heads * t.n_kv_heads;
  std::fill(hg.qt, hg.qt + hg.groups * hg.floats(), 0.0f);
  std::fill(hg.acct, hg.acct + hg.groups * hg.floats(), 0.0f);
  std::fill(hg.m, hg.m + hg.groups * kWideLanes, -INFINITY);
  std::fill(hg.l, hg.l + hg.groups * kWideLanes, 0.0f);
  for (int32_t i = 0; i < t.n_rows * t.n_q_heads; ++i) {
    const int32_t qi = query_index(t, h, i);
    const float* q = t.q + (qi / per_row) * t.q_stride + static_cast<size_t>(qi % per_row) * t.head_dim;
    for (int32_t d = 0; d < t.head_dim; ++d) *hg.at(hg.qt, i, d) = q[d];
  }
}

// KV head h's groups' state back into the per-query state.
void store_state(const AttentionTile& t, int32_t h, const HeadGroups& hg, float* state_m, float* state_l,
                 float* state_acc) {
  for (int32_t i = 0; i < t.n_rows * t.n_q_heads; ++i) {
    const int32_t qi = query_index(t, h, i);
    state_m[qi] = hg.m[hg.lane(i)];
    state_l[qi] = hg.l[hg.lane(i)];
    for (int32_t d = 0; d < t.head_dim; ++d)
      state_acc[static_cast<size_t>(qi) * t.head_dim + d] = *hg.at(hg.acct, i, d);
  }
}

// Each lane's visible keys of the causal span [key0, key0 + n_in): query i of the head reads up to its position.
// Lanes past the last query read none.
void set_visible(const AttentionTile& t, int32_t key0, int32_t n_in, const HeadGroups& hg) {
  const int32_t n_queries = t.n_rows * t.n_q_heads;
  for (int32_t i = 0; i < hg.groups * kWideLanes; ++i) {
    hg.visible[i] = i < n_queries ? std::clamp(t.first_pos + i / t.n_q_heads - key0 + 1, 0, n_in) : 0;
  }
}

// Every span of KV head h up to the tile's last key for every group (`full` keys every query reads whole, then the
// causal spans), asking for the K/V rows kWideAheadSpans spans ahead into L2 as the first pair of groups computes
// its scores.
void attend_spans(const AttentionTile& t, int32_t h, const PagedKvView& k, const PagedKvView& v, int32_t span,
                  int32_t full, const WideScratch& scratch, const HeadGroups& hg) {
  const int32_t kv_head = t.kv_head + h;
  const bool f16 = k.dtype == KvDtype::kF16 && v.dtype == KvDtype::kF16;
  const int32_t n_keys = t.first_pos + t.n_rows;
  const float* k_rows[kMaxSpan];
  const float* v_rows[kMaxSpan];
  const uint8_t* k_raw[kMaxSpan];
  const uint8_t* v_raw[kMaxSpan];
  const uint8_t* k_ahead[kMaxSpan];
  const uint8_t* v_ahead[kMaxSpan];
  for (int32_t key0 = 0; key0 < n_keys; key0 += span) {
    WideAhead fetch;
    if (const int32_t ahead = key0 + kWideAheadSpans * span; ahead < n_keys) {
      const int32_t n_ahead = std::min(span, n_keys - ahead);
      head_rows(k, kv_head, ahead, n_ahead, k_ahead);
      head_rows(v, kv_head, ahead, n_ahead, v_ahead);
      fetch = {k_ahead, v_ahead, n_ahead, k.head_bytes, v.head_bytes};
    }
    // A causal span's keys past the last one are padded to a multiple of 8 with its first key's rows: readable,
    // and no lane reads them.
    const bool causal = key0 >= full;
    const int32_t n_in = std::min(span, n_keys - key0);
    const int32_t n = (n_in + 7) / 8 * 8;
    if (causal) set_visible(t, key0, n_in, hg);
    if (f16) {
      head_rows(k, kv_head, key0, n_in, k_raw);
      head_rows(v, kv_head, key0, n_in, v_raw);
      std::fill(k_raw + n_in, k_raw + n, k_raw[0]);
      std::fill(v_raw + n_in, v_raw + n, v_raw[0]);
    } else {
      load_tile(k, kv_head, key0, n_in, t.head_dim, scratch.k_tile, k_rows);
      load_tile(v, kv_head, key0, n_in, t.head_dim, scratch.v_tile, v_rows);
      std::fill(k_rows + n_in, k_rows + n, k_rows[0]);
      std::fill(v_rows + n_in, v_rows + n, v_rows[0]);
    }
    for (int32_t g = 0; g < hg.groups; g += 2) {
      const WideGroup pair[2] = {hg.group(g, causal), hg.group(std::min(g + 1, hg.groups - 1), causal)};
      const int32_t n_groups = std::min(2, hg.groups - g);
      const WideAhead pf = g == 0 ? fetch : WideAhead{};  // the first pair asks; the others find them there
      if (f16) {
        wide_attend_span_f16_avx512(pair, n_groups, k_raw, v_raw, n, t.head_dim, t.scale, hg.pt, pf);
      } else {
        wide_attend_span_avx512(pair, n_groups, k_rows, v_rows, n, t.head_dim, t.scale, hg.pt, pf);
      }
    }
  }
}

}  // namespace

size_t wide_scratch_floats(int32_t span, int32_t head_dim, int32_t n_queries) {
  const size_t groups = (static_cast<size_t>(n_queries) + kWideLanes - 1) / kWideLanes;
  return kWideLanes * (groups * (2 * static_cast<size_t>(head_dim) + 3) + 2 * static_cast<size_t>(span) + 1);
}

int32_t attend_prefix_wide(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v, int32_t span,
                           const WideScratch& scratch, float* state_m, float* state_l, float* state_acc) {
  const int32_t hd = t.head_dim;
  const int32_t per_head = t.n_rows * t.n_q_heads;
  if (per_head < kWideMinQueries || hd % 16 != 0 || hd > kWideMaxHeadDim || t.softcap > 0.0f ||
      first_key_of(t, t.first_pos + t.n_rows - 1) > 0 || !isa_at_least(IsaLevel::kAvx512Vnni)) {
    return 0;
  }
  const HeadGroups hg(scratch.area, per_head, hd);
  const int32_t full = (t.first_pos + 1) / span * span;  // the keys before it every query reads whole
  for (int32_t h = 0; h < t.n_kv_heads; ++h) {
    load_queries(t, h, hg);
    attend_spans(t, h, k, v, span, full, scratch, hg);
    store_state(t, h, hg, state_m, state_l, state_acc);
  }
  return (t.first_pos + t.n_rows + span - 1) / span * span;
}

}  // namespace hearth::kernels

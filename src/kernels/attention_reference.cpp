// attention_tile's reference twin: every score, softmax and value sum in double, straight from the definition
// (dequantizing each K/V row with the reference dequantizer), for the tests to hold the fast paths against.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_rows.h"
#include "tensor/kv_dtype.h"

namespace hearth {

using kernels::first_key_of;

void attention_tile_reference(const AttentionTile& t, const PagedKvView& k, const PagedKvView& v) {
  const int32_t hd = t.head_dim;
  std::vector<float> kj(hd), vj(hd);
  for (int32_t r = 0; r < t.n_rows; ++r) {
    const int32_t j0 = first_key_of(t, t.first_pos + r);
    const int32_t n_keys = t.first_pos + r + 1 - j0;
    for (int32_t i = 0; i < t.n_q_heads * t.n_kv_heads; ++i) {
      const int32_t kv_head = t.kv_head + i / t.n_q_heads;
      const float* q = t.q + r * t.q_stride + static_cast<size_t>(i) * hd;
      std::vector<double> s(n_keys);
      double max_score = -INFINITY;
      for (int32_t j = 0; j < n_keys; ++j) {
        kv_dequantize_head_reference(k.dtype, k.head(j0 + j, kv_head), kj.data(), hd);
        double dot = 0.0;
        for (int32_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * kj[d];
        s[j] = dot * t.scale;
        if (t.softcap > 0.0f) s[j] = t.softcap * std::tanh(s[j] / t.softcap);
        max_score = std::max(max_score, s[j]);
      }
      if (t.sinks != nullptr) max_score = std::max(max_score, static_cast<double>(t.sinks[i]));
      double sum = 0.0;
      for (double& x : s) sum += (x = std::exp(x - max_score));
      if (t.sinks != nullptr) sum += std::exp(static_cast<double>(t.sinks[i]) - max_score);
      std::vector<double> out(hd, 0.0);
      for (int32_t j = 0; j < n_keys; ++j) {
        kv_dequantize_head_reference(v.dtype, v.head(j0 + j, kv_head), vj.data(), hd);
        for (int32_t d = 0; d < hd; ++d) out[d] += s[j] / sum * vj[d];
      }
      float* o = t.out + r * t.out_stride + static_cast<size_t>(i) * hd;
      for (int32_t d = 0; d < hd; ++d) o[d] = static_cast<float>(out[d]);
    }
  }
}

}  // namespace hearth

#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace hearth {

namespace {

// Ascending keys are descending logits: the IEEE order made unsigned (negatives inverted, positives above them),
// then inverted; -0 is taken as +0 first, since the two compare equal.
uint32_t descending_key(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f == 0.0f ? 0.0f : f);
  const uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

}  // namespace

void sort_by_logit(std::span<const float> logits, std::vector<std::pair<float, int32_t>>& out,
                   std::vector<LogitKey>& scratch) {
  constexpr int kDigitBits = 11;  // three passes cover the 32-bit key
  constexpr uint32_t kDigits = 1u << kDigitBits;
  const size_t n = logits.size();
  std::vector<LogitKey>& a = scratch;
  a.resize(2 * n);
  LogitKey* src = a.data();
  LogitKey* dst = a.data() + n;
  for (size_t i = 0; i < n; ++i) src[i] = {descending_key(logits[i]), static_cast<int32_t>(i)};
  for (int shift = 0; shift < 32; shift += kDigitBits) {
    std::array<uint32_t, kDigits> start{};
    for (size_t i = 0; i < n; ++i) ++start[(src[i].key >> shift) & (kDigits - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : start) sum += std::exchange(c, sum);
    // Stable: equal digits keep their order, so equal keys stay in ascending id order.
    for (size_t i = 0; i < n; ++i) dst[start[(src[i].key >> shift) & (kDigits - 1)]++] = src[i];
    std::swap(src, dst);
  }
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = {logits[static_cast<size_t>(src[i].id)], src[i].id};
}

Sampler::Sampler(const SamplingParams& params, std::span<const TokenId> context) : params_(params), rng_(params.seed) {
  if (!params_.repeats_penalized()) return;
  const size_t keep =
      params_.repeat_last_n < 0 ? context.size() : std::min(context.size(), static_cast<size_t>(params_.repeat_last_n));
  for (TokenId t : context.subspan(context.size() - keep)) remember(t.value);
}

void Sampler::remember(int32_t token) {
  window_.push_back(token);
  ++window_counts_[token];
  if (params_.repeat_last_n >= 0 && window_.size() > static_cast<size_t>(params_.repeat_last_n)) {
    const int32_t gone = window_.front();
    window_.pop_front();
    if (--window_counts_[gone] == 0) window_counts_.erase(gone);
  }
}

TokenId argmax(std::span<const float> logits) {
  HEARTH_CHECK(!logits.empty(), "argmax of empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return TokenId{static_cast<int32_t>(best)};
}

std::span<const float> Sampler::adjust(std::span<const float> logits) {
  adjusted_.assign(logits.begin(), logits.end());
  for (const auto& [token, bias] : params_.logit_bias) adjusted_[static_cast<size_t>(token)] += bias;
  for (const auto& [token, count] : window_counts_) {
    // A context token beyond this row's vocabulary (a prompt of raw ids is checked against the model) is skipped.
    if (token < 0 || static_cast<size_t>(token) >= adjusted_.size()) continue;
    float& logit = adjusted_[static_cast<size_t>(token)];
    logit = logit > 0.0f ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
  }
  for (const auto& [token, count] : counts_) {
    adjusted_[static_cast<size_t>(token)] -=
        static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
  return adjusted_;
}

TokenId Sampler::sample(std::span<const float> logits) {
  const bool adjusts = params_.adjusts_logits();
  if (adjusts) logits = adjust(logits);
  const TokenId token = params_.temperature <= 0.0f ? argmax(logits) : sample_stochastic(logits);
  if (params_.repeats_penalized()) remember(token.value);
  if (adjusts && (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f)) {
    auto it = std::find_if(counts_.begin(), counts_.end(), [&](const auto& c) { return c.first == token.value; });
    if (it == counts_.end()) {
      counts_.emplace_back(token.value, 1);
    } else {
      ++it->second;
    }
  }
  return token;
}

TokenId Sampler::sample_stochastic(std::span<const float> logits) {
  // Order by logit descending, id ascending on ties, so the result never depends on sort stability.
  size_t n = logits.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    auto by_logit = [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    candidates_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), by_logit);
  } else {
    sort_by_logit(logits, candidates_, sort_scratch_);
  }
  const float max_logit = candidates_[0].first;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    candidates_[i].first = std::exp((candidates_[i].first - max_logit) / params_.temperature);
    sum += candidates_[i].first;
  }
  if (params_.min_p > 0.0f) {
    // Sorted descending, so the first is the most likely (exp(0) = 1): keep while p >= min_p * p_max.
    size_t keep = 1;
    while (keep < n && candidates_[keep].first >= params_.min_p) ++keep;
    n = keep;
    sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += candidates_[i].first;
  }
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += candidates_[i].first / sum;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += candidates_[i].first;
  }
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * sum;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += candidates_[i].first;
    if (u < cumulative) return TokenId{candidates_[i].second};
  }
  return TokenId{candidates_[n - 1].second};
}

TokenLogprobs token_logprobs(std::span<const float> logits, TokenId token, int32_t num_top) {
  HEARTH_CHECK(!logits.empty() && token.value >= 0 && static_cast<size_t>(token.value) < logits.size(),
               "logprobs of token {} over {} logits", token.value, logits.size());
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = max_logit + std::log(sum);  // >= every logit, so every logprob is <= 0
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<float>(logits[token.value] - log_z);
  const size_t n = std::min(static_cast<size_t>(std::max(num_top, 0)), logits.size());
  if (n == 0) return out;
  // Insertion into a sorted top-n: better logit first, lower id first on ties (so the greedy token leads).
  out.top.reserve(n + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (out.top.size() == n && !(x > out.top.back().logprob)) continue;
    auto at = std::upper_bound(out.top.begin(), out.top.end(), x,
                               [](float v, const TokenLogprob& t) { return v > t.logprob; });
    out.top.insert(at, {TokenId{static_cast<int32_t>(i)}, x});
    if (out.top.size() > n) out.top.pop_back();
  }
  for (TokenLogprob& t : out.top) t.logprob = static_cast<float>(t.logprob - log_z);
  return out;
}

}  // namespace hearth

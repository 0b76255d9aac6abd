#pragma once
// Sampler: turns one row of logits into a token. Temperature 0 is greedy (argmax, lowest id on ties).
// Otherwise: top-k, then softmax at the temperature, then min-p, then top-p (nucleus), then a draw from a seeded
// RNG, so a given seed always reproduces the same tokens. Before all of that a copy of the row is adjusted, in this
// order: logit_bias, the repeat penalty (over the last repeat_last_n tokens of the context: the prompt's tail given
// at construction, then the tokens this sampler returned), the frequency and presence penalties (over the tokens
// this sampler returned).

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_types.h"
#include "sched/sampling_params.h"
#include "util/ids.h"
#include "util/result.h"

namespace hearth {

// A logit's place in the sampler's order as an unsigned key (larger logit, smaller key), and its token.
struct LogitKey {
  uint32_t key;
  int32_t id;
};

// Fills `out` with (logits[id], id) for every token, ordered by logit descending and id ascending on ties (-0 and
// +0 tie, as they compare equal), the order a std::sort by that comparison gives, in O(n): a stable radix sort of
// the logits' bits over the ids in ascending order. std::sort took 1.8 ms for a 32,000-token vocabulary and 10 ms
// for 152,000, once per sampled token. `scratch` is reused storage.
void sort_by_logit(std::span<const float> logits, std::vector<std::pair<float, int32_t>>& out,
                   std::vector<LogitKey>& scratch);

class Sampler {
 public:
  // `context`: the prompt, whose tail the repeat penalty looks at (only its last repeat_last_n tokens are kept).
  explicit Sampler(const SamplingParams& params, std::span<const TokenId> context = {});

  // Requires logits.size() > 0 (and logit_bias ids below it: check_request). Advances the RNG only when sampling
  // (temperature > 0). Counts the returned token for the penalties.
  TokenId sample(std::span<const float> logits);

 private:
  TokenId sample_stochastic(std::span<const float> logits);
  // logit_bias and the penalties applied to a copy of `logits` (adjusted_).
  std::span<const float> adjust(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit or prob, token id), reused across calls
  std::vector<LogitKey> sort_scratch_;
  std::vector<float> adjusted_;
  std::vector<std::pair<int32_t, int32_t>> counts_;  // (token id, times returned), with penalties only
  // The repeat penalty's window: the last repeat_last_n tokens of the context, and how often each id is in it.
  std::deque<int32_t> window_;
  std::unordered_map<int32_t, int32_t> window_counts_;
  void remember(int32_t token);
};

TokenId argmax(std::span<const float> logits);

// `token`'s log-probability and the `num_top` most likely tokens' (most likely first, lowest id on ties) under
// log-softmax of the raw `logits` (no temperature, no truncation). Requires finite logits, a valid token,
// num_top >= 0. Reads the row twice and keeps the top in O(num_top) memory: it allocates only the result.
[[nodiscard]] TokenLogprobs token_logprobs(std::span<const float> logits, TokenId token, int32_t num_top);

}  // namespace hearth

#pragma once
// SamplingParams: how a request's next token is chosen. Plain data; the engine's Sampler acts on it.

#include <cstdint>
#include <utility>
#include <vector>

#include "util/result.h"

namespace hearth {

struct SamplingParams {
  float temperature = 0.8f;  // 0 = greedy
  int32_t top_k = 40;        // 0 disables
  float top_p = 0.95f;       // 1 disables
  uint64_t seed = 0;
  // OpenAI's repetition penalties, over the tokens this request has generated (not the prompt):
  // logit[t] -= count[t] * frequency_penalty + (count[t] > 0 ? presence_penalty : 0). In [-2, 2]; 0 disables.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Added to the logits of these token ids before sampling (OpenAI's logit_bias), each in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // min-p: after top-k, the tokens whose probability at the temperature is below min_p times the most likely one's
  // are dropped (then top-p). In [0, 1]; 0 disables.
  float min_p = 0.0f;
  // llama.cpp's repetition penalty, over the last repeat_last_n tokens of the context (the prompt's tail, then the
  // tokens generated): each distinct token there has its logit divided by repeat_penalty when positive, multiplied
  // when not. repeat_penalty in (0, 10], 1 disables; repeat_last_n >= -1: 0 disables, -1 is the whole context.
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;

  bool repeats_penalized() const { return repeat_penalty != 1.0f && repeat_last_n != 0; }
  bool adjusts_logits() const {
    return frequency_penalty != 0.0f || presence_penalty != 0.0f || !logit_bias.empty() || repeats_penalized();
  }

  // Checks ranges; the message names the bad field and its allowed range.
  [[nodiscard]] Result<void> validate() const {
    if (!(temperature >= 0.0f && temperature <= 100.0f)) {
      return make_error("temperature {} is out of range [0, 100]", temperature);
    }
    if (!(top_p > 0.0f && top_p <= 1.0f)) return make_error("top_p {} is out of range (0, 1]", top_p);
    if (top_k < 0) return make_error("top_k {} must be >= 0 (0 disables it)", top_k);
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
      return make_error("frequency_penalty {} is out of range [-2, 2]", frequency_penalty);
    }
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
      return make_error("presence_penalty {} is out of range [-2, 2]", presence_penalty);
    }
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return make_error("min_p {} is out of range [0, 1]", min_p);
    if (!(repeat_penalty > 0.0f && repeat_penalty <= 10.0f)) {
      return make_error("repeat_penalty {} is out of range (0, 10]", repeat_penalty);
    }
    if (repeat_last_n < -1) return make_error("repeat_last_n {} must be >= -1 (-1: the whole context)", repeat_last_n);
    for (const auto& [token, bias] : logit_bias) {
      if (!(bias >= -100.0f && bias <= 100.0f)) return make_error("logit_bias {} is out of range [-100, 100]", bias);
    }
    return {};
  }
};

}  // namespace hearth

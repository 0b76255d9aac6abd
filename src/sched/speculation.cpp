#include "sched/speculation.h"

#include <algorithm>

namespace hearth {

std::optional<SpeculativeMode> parse_speculative_mode(std::string_view name) {
  if (name == "off") return SpeculativeMode::kOff;
  if (name == "prompt_lookup" || name == "prompt-lookup") return SpeculativeMode::kPromptLookup;
  if (name == "auto") return SpeculativeMode::kAuto;
  return std::nullopt;
}

std::string_view speculative_mode_name(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::kOff:
      return "off";
    case SpeculativeMode::kPromptLookup:
      return "prompt_lookup";
    case SpeculativeMode::kAuto:
      return "auto";
  }
  return "off";
}

Result<void> SpeculativeParams::validate() const {
  if (max_draft < 1 || max_draft > kMaxDraftLimit) {
    return make_error("speculative max_draft {} is out of range [1, {}]", max_draft, kMaxDraftLimit);
  }
  if (min_ngram < 1 || min_ngram > kMaxNgramLimit) {
    return make_error("speculative min_ngram {} is out of range [1, {}]", min_ngram, kMaxNgramLimit);
  }
  if (max_ngram < min_ngram || max_ngram > kMaxNgramLimit) {
    return make_error("speculative max_ngram {} is out of range [min_ngram {}, {}]", max_ngram, min_ngram,
                      kMaxNgramLimit);
  }
  return {};
}

int32_t prompt_lookup_draft(std::span<const TokenId> tokens, int32_t min_ngram, int32_t max_ngram, int32_t max_draft,
                            std::vector<TokenId>& draft) {
  draft.clear();
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0 || min_ngram < 1) return 0;
  const int64_t start = std::max<int64_t>(0, len - kMaxLookback);
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= min_ngram; --n) {
    const std::span<const TokenId> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The most recent occurrence that is followed by at least one token: i + n < len.
    for (int64_t i = len - n - 1; i >= start; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t count = std::min<int64_t>(max_draft, len - from);
      draft.assign(tokens.begin() + from, tokens.begin() + from + count);
      return static_cast<int32_t>(count);
    }
  }
  return 0;
}

bool SpeculationState::wants_draft(SpeculativeMode mode) {
  if (mode == SpeculativeMode::kOff) return false;
  if (mode == SpeculativeMode::kAuto && paused_steps > 0) {
    --paused_steps;
    return false;
  }
  return true;
}

int32_t SpeculationState::draft_limit(const SpeculativeParams& params) const {
  return params.mode == SpeculativeMode::kAuto ? std::min(params.max_draft, auto_draft) : params.max_draft;
}

void SpeculationState::on_verified(SpeculativeMode mode, int32_t drafted, int32_t accepted) {
  num_drafted += drafted;
  num_accepted += accepted;
  ++num_verify_steps;
  if (mode != SpeculativeMode::kAuto) return;
  if (accepted == drafted) {
    auto_draft = std::min(auto_draft * 2, SpeculativeParams::kMaxDraftLimit);
  } else if (2 * accepted < drafted) {
    auto_draft = std::max(auto_draft / 2, 1);
  }
  ++window_steps;
  window_drafted += drafted;
  window_accepted += accepted;
  if (window_steps < kAutoWindowSteps) return;
  if (window_accepted < kAutoMinAcceptance * window_drafted) {
    paused_steps = backoff;
    backoff = std::min(backoff * 2, kAutoMaxBackoff);
  } else {
    backoff = kAutoFirstBackoff;
  }
  window_steps = window_drafted = window_accepted = 0;
}

}  // namespace hearth

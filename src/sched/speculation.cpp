#include "sched/speculation.h"

#include <algorithm>

namespace hearth {

std::optional<SpeculativeMode> parse_speculative_mode(std::string_view name) {
  if (name == "off") return SpeculativeMode::kOff;
  if (name == "prompt_lookup" || name == "prompt-lookup") return SpeculativeMode::kPromptLookup;
  if (name == "auto") return SpeculativeMode::kAuto;
  if (name == "draft_model" || name == "draft-model") return SpeculativeMode::kDraftModel;
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
    case SpeculativeMode::kDraftModel:
      return "draft_model";
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

namespace {

// Whether `suffix` occurs at prediction[i], followed by at least one token.
bool occurs_at(std::span<const TokenId> prediction, std::span<const TokenId> suffix, size_t i) {
  return i + suffix.size() < prediction.size() &&
         std::equal(suffix.begin(), suffix.end(), prediction.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace

int32_t prediction_draft(std::span<const TokenId> prediction, std::span<const TokenId> output, int32_t min_ngram,
                         int32_t max_ngram, int32_t max_draft, PredictionCursor& cursor, std::vector<TokenId>& draft) {
  draft.clear();
  if (max_draft <= 0 || prediction.empty()) return 0;
  const auto out_len = static_cast<int32_t>(output.size());
  const auto pred_len = static_cast<int32_t>(prediction.size());
  while (!cursor.diverged && cursor.aligned < out_len) {
    if (cursor.aligned >= pred_len || output[cursor.aligned] != prediction[cursor.aligned]) {
      cursor.diverged = true;
    } else {
      ++cursor.aligned;
    }
  }
  auto take = [&](int32_t from) {
    const int32_t count = std::min(max_draft, pred_len - from);
    draft.assign(prediction.begin() + from, prediction.begin() + from + count);
    return count;
  };
  if (!cursor.diverged) return cursor.aligned < pred_len ? take(cursor.aligned) : 0;
  for (int32_t n = std::min(max_ngram, out_len); n >= std::max(min_ngram, 1); --n) {
    const std::span<const TokenId> suffix = output.subspan(static_cast<size_t>(out_len - n));
    // The first at or after the cursor (the answer moving on through the prediction), else the nearest before it.
    const auto from = static_cast<size_t>(std::clamp(cursor.next, 0, pred_len));
    std::optional<size_t> found;
    for (size_t i = from; !found && i + static_cast<size_t>(n) < prediction.size(); ++i) {
      if (occurs_at(prediction, suffix, i)) found = i;
    }
    for (size_t i = from; !found && i-- > 0;) {
      if (occurs_at(prediction, suffix, i)) found = i;
    }
    if (!found) continue;
    cursor.next = static_cast<int32_t>(*found) + n;
    return take(cursor.next);
  }
  return 0;
}

bool SpeculationState::wants_draft(SpeculativeMode mode) {
  if (mode == SpeculativeMode::kOff) return false;
  if (adapts_to_acceptance(mode) && paused_steps > 0) {
    --paused_steps;
    return false;
  }
  return true;
}

int32_t SpeculationState::draft_limit(const SpeculativeParams& params) const {
  return adapts_to_acceptance(params.mode) ? std::min(params.max_draft, auto_draft) : params.max_draft;
}

void VerifyRowCost::observe(int32_t rows, double seconds) {
  if (rows < 1 || !(seconds >= 0)) return;
  auto average = [](double& avg, int32_t& samples, double value) {
    avg = samples == 0 ? value : avg + kWeight * (value - avg);
    ++samples;
  };
  if (rows == 1) {
    average(one_row_, one_row_samples_, seconds);
  } else if (one_row_samples_ > 0) {
    average(per_row_, per_row_samples_, std::max(0.0, seconds - one_row_) / (rows - 1));
  }
}

std::optional<double> VerifyRowCost::ratio() const {
  if (one_row_samples_ < kMinSamples || per_row_samples_ < kMinSamples || one_row_ <= 0) return std::nullopt;
  return per_row_ / one_row_;
}

void SpeculationState::on_verified(SpeculativeMode mode, int32_t drafted, int32_t accepted,
                                   std::optional<double> row_cost) {
  num_drafted += drafted;
  num_accepted += accepted;
  ++num_verify_steps;
  if (draft_is_prediction) {
    num_prediction_drafted += drafted;
    num_prediction_accepted += accepted;
  }
  if (!adapts_to_acceptance(mode)) return;
  if (accepted == drafted) {
    auto_draft = std::min(auto_draft * 2, SpeculativeParams::kMaxDraftLimit);
  } else if (2 * accepted < drafted) {
    auto_draft = std::max(auto_draft / 2, 1);
  }
  ++window_steps;
  window_drafted += drafted;
  window_accepted += accepted;
  if (window_steps < kAutoWindowSteps) return;
  // The measured break-even, kept inside [0.05, 0.95]: a draft is always worth a retry now and then.
  const double break_even = row_cost ? std::clamp(*row_cost, 0.05, 0.95) : kAutoMinAcceptance;
  if (window_accepted < break_even * window_drafted) {
    paused_steps = static_cast<int32_t>(backoff * std::max(1.0, break_even / kAutoMinAcceptance));
    backoff = std::min(backoff * 2, kAutoMaxBackoff);
  } else {
    backoff = kAutoFirstBackoff;
  }
  window_steps = window_drafted = window_accepted = 0;
}

}  // namespace hearth

#pragma once
// Speculative decoding, the scheduler's half: which requests draft, the prompt-lookup drafter, and the per-request
// acceptance bookkeeping that lets `auto` switch drafting off where it would only cost time. Pure token logic: the
// engine verifies a draft (one forward pass over the pending token and the k drafted ones, then the sampler picks
// at each row exactly as plain decoding would, accepting while the pick equals the draft), so the output is the
// one plain decoding gives, token for token.
//
// Prompt lookup (llama.cpp's lookup decoding, vLLM's n-gram proposer): the last n tokens of the sequence (n from
// max_ngram down to min_ngram) are looked for earlier in the prompt and the generated text, the most recent match
// first; the tokens that followed it are the draft. It is right exactly where an answer repeats its input: quoting
// a document, tool-call JSON over a catalogue, a code edit.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "util/ids.h"
#include "util/result.h"

namespace hearth {

enum class SpeculativeMode : uint8_t {
  kOff,
  kPromptLookup,  // draft at every decode step where the history has a match
  kAuto,          // prompt lookup, paused (with backoff) while the measured acceptance makes it slower than plain
  kDraftModel,    // a small model of the same vocabulary drafts greedily (ModelDrafter), paused as auto is
};

// Whether auto's draft length and pausing (measured acceptance against the break-even) apply: auto and the draft
// model, whose drafts cost time to make as well as to verify.
constexpr bool adapts_to_acceptance(SpeculativeMode mode) {
  return mode == SpeculativeMode::kAuto || mode == SpeculativeMode::kDraftModel;
}

// A drafter the scheduler calls out to (the engine's draft model, engine/model_drafter.h): proposes up to `limit`
// tokens to follow `tokens` (a request's prompt and output so far) into `draft` (cleared first); returns how many.
// The scheduler never sees what computes them; a proposal that is wrong only costs a rejected draft.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual int32_t propose(std::span<const TokenId> tokens, int32_t limit, std::vector<TokenId>& draft) = 0;
};

// "off", "prompt_lookup" ("prompt-lookup" too), "auto"; nullopt for anything else.
[[nodiscard]] std::optional<SpeculativeMode> parse_speculative_mode(std::string_view name);
[[nodiscard]] std::string_view speculative_mode_name(SpeculativeMode mode);

struct SpeculativeParams {
  static constexpr int32_t kMaxDraftLimit = 32;
  static constexpr int32_t kMaxNgramLimit = 8;
  SpeculativeMode mode = SpeculativeMode::kOff;
  int32_t max_draft = 8;  // drafted tokens per step at most, in [1, kMaxDraftLimit]
  int32_t max_ngram = 3;  // the longest suffix looked up, in [min_ngram, kMaxNgramLimit]
  int32_t min_ngram = 1;  // the shortest, >= 1

  bool enabled() const { return mode != SpeculativeMode::kOff; }

  // Checks ranges; the message names the field.
  [[nodiscard]] Result<void> validate() const;
};

// Prompt lookup: writes into `draft` (cleared first) up to max_draft tokens that followed the most recent earlier
// occurrence of the longest suffix of `tokens` of max_ngram down to min_ngram tokens, searching at most the last
// kMaxLookback tokens. Returns the draft's size (0: no match, or max_draft <= 0). O(kMaxLookback * max_ngram).
inline constexpr int32_t kMaxLookback = 4096;
int32_t prompt_lookup_draft(std::span<const TokenId> tokens, int32_t min_ngram, int32_t max_ngram, int32_t max_draft,
                            std::vector<TokenId>& draft);

// A predicted output (OpenAI's "prediction": the text the client expects the answer to be mostly, e.g. the file a
// code edit rewrites): while the output so far equals the prediction's head, the draft is the prediction's next
// tokens; once they differ (an edit), the output's last max_ngram..min_ngram tokens are looked up in the prediction,
// the occurrence nearest at or after the last one drafted from first, so the draft follows the prediction again
// where the answer rejoins it. `output` is the generated tokens only; the cursor carries what was already checked.
struct PredictionCursor {
  int32_t aligned = 0;     // output tokens known equal to the prediction's head
  bool diverged = false;   // the output left the prediction's head (then only the n-gram lookup drafts)
  int32_t next = 0;        // the prediction index after the last n-gram match drafted from
};
int32_t prediction_draft(std::span<const TokenId> prediction, std::span<const TokenId> output, int32_t min_ngram,
                         int32_t max_ngram, int32_t max_draft, PredictionCursor& cursor, std::vector<TokenId>& draft);

// What a verify row costs, measured: the engine reports the wall time of every step that computed no prompt token
// (only decode and verify rows), and this keeps an average of a one-row step's time t1 and of the marginal time of
// each further row m. A draft of k tokens accepted at rate a emits 1 + a·k tokens for t1 + m·k, against one token
// per t1 plain, so drafting pays where a > m / t1: that ratio is auto's break-even acceptance. On a model whose
// step is one pass over its weights (110M and up) a row costs a small fraction of a step; on stories260K, nearly a
// whole one.
class VerifyRowCost {
 public:
  static constexpr double kWeight = 0.1;      // of each new observation in the running averages
  static constexpr int32_t kMinSamples = 3;   // of each kind before the ratio is trusted
  void observe(int32_t rows, double seconds);
  // m / t1, or nullopt until both are measured.
  [[nodiscard]] std::optional<double> ratio() const;

 private:
  double one_row_ = 0;
  double per_row_ = 0;
  int32_t one_row_samples_ = 0;
  int32_t per_row_samples_ = 0;
};

// One request's speculation: this step's draft, totals for usage, and `auto`'s pause.
//   auto: a verify step with k rows costs more than a plain step (on a CPU a 9-row pass over a 110M model takes a few
//   times one row's), so auto drafts short until drafts pay: its draft length starts at kAutoFirstDraft, doubles
//   (up to max_draft) after a draft accepted whole and halves (down to 1) after one less than half accepted. After
//   every kAutoWindowSteps verify steps the window's acceptance is judged: below kAutoMinAcceptance drafting pauses
//   for `backoff` decode steps, and the backoff doubles (up to kAutoMaxBackoff) for the next failure; a window at or
//   above it resets the backoff. So a request whose output never repeats its input pays a few short drafts, then
//   ever rarer retries, and one that starts repeating later is found again. Where the engine has measured what a
//   verify row costs (VerifyRowCost), the break-even acceptance replaces kAutoMinAcceptance.
struct SpeculationState {
  static constexpr int32_t kAutoWindowSteps = 4;
  static constexpr double kAutoMinAcceptance = 0.25;
  static constexpr int32_t kAutoFirstDraft = 4;
  static constexpr int32_t kAutoFirstBackoff = 16;
  static constexpr int32_t kAutoMaxBackoff = 1024;

  std::vector<TokenId> draft;  // the tokens drafted for this step (empty: a plain decode step)
  bool draft_is_prediction = false;  // this step's draft came from the request's predicted output
  int32_t num_drafted = 0;           // totals over the request
  int32_t num_accepted = 0;
  int32_t num_verify_steps = 0;
  int32_t num_prediction_drafted = 0;  // of them, drafted from the predicted output
  int32_t num_prediction_accepted = 0;
  PredictionCursor prediction;
  // auto
  int32_t window_steps = 0;
  int32_t window_drafted = 0;
  int32_t window_accepted = 0;
  int32_t paused_steps = 0;
  int32_t backoff = kAutoFirstBackoff;
  int32_t auto_draft = kAutoFirstDraft;

  // Whether to draft at this decode step (auto: counts down a pause).
  bool wants_draft(SpeculativeMode mode);
  // The longest draft to propose now: max_draft, or auto's current length.
  int32_t draft_limit(const SpeculativeParams& params) const;
  // A verified draft (this step's, draft_is_prediction telling its source): `drafted` tokens proposed, `accepted` of
  // them equal to the tokens decoding picked. `row_cost`: VerifyRowCost::ratio() where measured; auto then pauses
  // below that acceptance (not kAutoMinAcceptance), for pauses as much longer as the ratio is above it.
  void on_verified(SpeculativeMode mode, int32_t drafted, int32_t accepted,
                   std::optional<double> row_cost = std::nullopt);
};

}  // namespace hearth

#pragma once
// OutputProcessor: the engine's output stage, the one place where sampled tokens become what a caller reads.
// Per request it holds a Sequence (sampler, detokenizer, stop strings, text held back) and, each step:
//   - with top_logprobs asked, computes each sampled token's logprobs from the raw logits (observe_logits);
//   - detokenizes each sampled token into complete UTF-8 (IncrementalDecoder);
//   - matches stop strings across token boundaries and never emits them, holding back text that may start one;
//   - with a grammar, masks the logits to the tokens that keep the output valid (constrain) and advances the
//     grammar with each token; a whole output finishes the request. Near max_tokens it wraps up: once the tokens
//     left are at most the bytes of the grammar's quick_completion plus kWrapUpMargin, only tokens that follow
//     that completion are allowed, so the output still ends whole (a forced tool call stays a valid call even
//     when a weak model would write one string forever); such a request finishes with length, as its values were
//     cut short to fit;
//   - decides the finish: a stop token (never emitted), a stop string, the grammar's end, or max_tokens
//     (token_finish_reason);
//   - writes a finished request's usage from its Request (tokens, timings, reuse, preemptions).
// It never frees a block: the engine finishes the requests it names, through Scheduler::finish.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_types.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "sched/request.h"
#include "tokenizer/tokenizer.h"

namespace hearth {

class OutputProcessor {
 public:
  // Tokens of slack before max_tokens at which a constrained output starts to wrap up: a token may open more to
  // close than one byte's worth, so the wrap-up begins a little before the completion's length would be needed.
  static constexpr int32_t kWrapUpMargin = 8;
  // The longest completion looked for; an output that needs more to end just runs into max_tokens.
  static constexpr size_t kMaxWrapUpBytes = 4096;

  OutputProcessor(const Tokenizer& tokenizer, int32_t block_size) : tokenizer_(tokenizer), block_size_(block_size) {}

  // Starts tracking a request. Requires a fresh id.
  void add(RequestId id, const RequestSpec& spec);
  bool contains(RequestId id) const { return sequences_.contains(id); }
  // The request's sampler. Requires add(id).
  Sampler& sampler(RequestId id);

  // The logits `token` was sampled from: with RequestSpec::top_logprobs, its TokenLogprobs are computed here (and
  // nothing otherwise) and go out with the token in process_token. Requires add(id) and finite logits.
  void observe_logits(RequestId id, std::span<const float> logits, TokenId token);

  // With a grammar (RequestSpec::grammar): writes into `masked` the logits with every token the grammar does not
  // allow from the output so far set to -inf (the request's stop tokens are allowed once the output may end) and
  // returns true; false when no token is allowed (the request cannot go on: grammar_stuck). Without a grammar
  // returns false and touches nothing. Requires add(id).
  [[nodiscard]] bool has_grammar(RequestId id) { return sequence(id).grammar != nullptr; }
  [[nodiscard]] bool constrain(const Request& request, std::span<const float> logits, std::vector<float>& masked);
  [[nodiscard]] bool grammar_stuck(RequestId id) { return sequence(id).grammar_stuck; }

  // One sampled token of `request`, after Scheduler::update applied it: fills `out` with the token and its text
  // (unless it is a stop token) and returns the finish it implies (kNone to go on).
  [[nodiscard]] FinishReason process_token(const Request& request, TokenId token, RequestOutput& out);

  // The final output of a finished request (its blocks are released): the text still held back, the usage, the
  // token ids (moved out of the request). Stops tracking it. `news` is what this step already produced for it.
  [[nodiscard]] RequestOutput finish(Request& request, RequestOutput news);

 private:
  struct Sequence {
    Sequence(const Tokenizer& tokenizer, const RequestSpec& spec)
        : decoder(tokenizer, DecodeOptions{.render_special = spec.render_special_tokens}),
          sampler(spec.sampling, spec.prompt),
          stop(spec.stop),
          top_logprobs(spec.top_logprobs),
          grammar(spec.grammar) {
      if (grammar) grammar_state = grammar->start();
    }
    IncrementalDecoder decoder;
    Sampler sampler;
    std::vector<std::string> stop;
    std::optional<int32_t> top_logprobs;
    std::optional<TokenLogprobs> pending_logprobs;  // of the token sampled this step, until process_token
    std::string held;  // decoded text not yet emitted: it may be the start of a stop string
    std::shared_ptr<const Grammar> grammar;
    GrammarState grammar_state;  // after every token so far
    bool grammar_stuck = false;  // the last constrain() allowed no token
    bool wrapping_up = false;    // constrain() follows the grammar's quick completion (near max_tokens)
    std::string matched_stop;    // the stop string that ended the request, if one did
  };
  Sequence& sequence(RequestId id);
  // Appends the token's text to `out.new_text`, holding back a possible stop-string start; true when a stop
  // string matched (its text and everything after it is dropped).
  bool emit_text(Sequence& seq, TokenId token, RequestOutput& out);
  RequestUsage usage_of(const Request& request) const;

  const Tokenizer& tokenizer_;
  int32_t block_size_;
  std::unique_ptr<VocabBytes> vocab_bytes_;  // built at the first request with a grammar
  TokenMasker masker_;
  std::vector<uint8_t> allowed_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> sequences_;
};

}  // namespace hearth

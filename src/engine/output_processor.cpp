#include "engine/output_processor.h"

#include <algorithm>
#include <limits>

#include "engine/explain.h"
#include "util/result.h"

namespace hearth {
namespace {

double ms_between(RequestTimes::Clock::time_point a, RequestTimes::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string: text that must be held
// back because the next token may complete a stop string.
size_t stop_prefix_overlap(std::string_view text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > keep; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

void OutputProcessor::add(RequestId id, const RequestSpec& spec) {
  auto [it, inserted] = sequences_.emplace(id, std::make_unique<Sequence>(tokenizer_, spec));
  HEARTH_CHECK(inserted, "request {} is already tracked by the output stage", id.value);
}

OutputProcessor::Sequence& OutputProcessor::sequence(RequestId id) {
  auto it = sequences_.find(id);
  HEARTH_CHECK(it != sequences_.end(), "the output stage has no request {}", id.value);
  return *it->second;
}

Sampler& OutputProcessor::sampler(RequestId id) {
  return sequence(id).sampler;
}

bool OutputProcessor::emit_text(Sequence& seq, TokenId token, RequestOutput& out) {
  seq.held += seq.decoder.push(token);
  if (seq.stop.empty()) {
    out.new_text += std::exchange(seq.held, {});
    return false;
  }
  size_t first_match = std::string::npos;
  for (const std::string& s : seq.stop) {
    const size_t at = seq.held.find(s);
    if (at < first_match) {
      first_match = at;
      seq.matched_stop = s;
    }
  }
  if (first_match != std::string::npos) {
    out.new_text += seq.held.substr(0, first_match);
    seq.held.clear();
    return true;
  }
  const size_t keep = stop_prefix_overlap(seq.held, seq.stop);
  out.new_text += seq.held.substr(0, seq.held.size() - keep);
  seq.held.erase(0, seq.held.size() - keep);
  return false;
}

void OutputProcessor::observe_logits(RequestId id, std::span<const float> logits, TokenId token) {
  Sequence& seq = sequence(id);
  if (seq.top_logprobs) seq.pending_logprobs = token_logprobs(logits, token, *seq.top_logprobs);
}

bool OutputProcessor::constrain(const Request& request, std::span<const float> logits, std::vector<float>& masked) {
  Sequence& seq = sequence(request.id);
  if (!seq.grammar) return false;
  if (!vocab_bytes_) vocab_bytes_ = std::make_unique<VocabBytes>(tokenizer_);
  int32_t n = 0;
  // Wrap-up: the tokens left (this one included) barely cover the quickest way to a whole output, so only tokens
  // that follow it are allowed; each takes at least one of its bytes, and what is left of it is the completion
  // of the state after them (quick_completion is deterministic), so the output ends within that many tokens.
  const int32_t left = request.max_tokens - request.num_output_tokens();
  if (left <= static_cast<int32_t>(kMaxWrapUpBytes) + kWrapUpMargin) {
    const std::optional<std::string> rest = seq.grammar->quick_completion(seq.grammar_state, kMaxWrapUpBytes);
    if (rest && left <= static_cast<int32_t>(rest->size()) + kWrapUpMargin) {
      if (rest->empty()) {
        allowed_.assign(static_cast<size_t>(vocab_bytes_->vocab_size()), 0);
        for (TokenId t : request.stop_token_ids) {
          if (t.value >= 0 && t.value < vocab_bytes_->vocab_size()) n += std::exchange(allowed_[t.value], 1) == 0;
        }
      } else {
        n = vocab_bytes_->allow_prefixes_of(*rest, allowed_);
      }
      seq.wrapping_up = seq.wrapping_up || n > 0;
    }
  }
  if (n == 0) {
    n = masker_.compute(*seq.grammar, seq.grammar_state, *vocab_bytes_, request.stop_token_ids, allowed_);
  }
  seq.grammar_stuck = n == 0;
  if (n == 0) return false;
  // A model may have more output rows than the tokenizer has tokens (padding, e.g. Qwen): those are never allowed.
  masked.resize(logits.size());
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n_vocab = std::min(logits.size(), allowed_.size());
  for (size_t i = 0; i < n_vocab; ++i) masked[i] = allowed_[i] ? logits[i] : kMasked;
  for (size_t i = n_vocab; i < logits.size(); ++i) masked[i] = kMasked;
  return true;
}

FinishReason OutputProcessor::process_token(const Request& request, TokenId token, RequestOutput& out) {
  out.id = request.id;
  Sequence& seq = sequence(request.id);
  std::optional<TokenLogprobs> logprobs = std::exchange(seq.pending_logprobs, std::nullopt);
  if (request.is_stop_token(token)) return FinishReason::kStop;  // ends the request unseen
  out.new_tokens.push_back(token);
  if (logprobs) out.logprobs.push_back(std::move(*logprobs));
  bool grammar_done = false;
  if (seq.grammar) {
    const bool accepted = seq.grammar->advance(seq.grammar_state, vocab_bytes_->piece(token));
    HEARTH_CHECK(accepted, "request {}: token {} was sampled outside its grammar's mask", request.id.value,
                 token.value);
    grammar_done = Grammar::is_terminal(seq.grammar_state);
  }
  if (emit_text(seq, token, out)) return FinishReason::kStop;
  if (grammar_done) return seq.wrapping_up ? FinishReason::kLength : FinishReason::kStop;
  return token_finish_reason(request, token);
}

RequestUsage OutputProcessor::usage_of(const Request& r) const {
  const RequestTimes& t = r.times;
  RequestUsage u;
  u.prompt_tokens = r.num_prompt_tokens;
  u.completion_tokens = r.num_output_tokens();
  u.cached_tokens = std::max(0, r.num_cached_tokens);
  u.copied_tokens = r.num_copied_tokens;
  u.preemptions = r.num_preemptions;
  u.drafted_tokens = r.spec.num_drafted;
  u.accepted_tokens = r.spec.num_accepted;
  u.verify_steps = r.spec.num_verify_steps;
  u.prediction_tokens = static_cast<int32_t>(r.prediction.size());
  u.accepted_prediction_tokens = r.spec.num_prediction_accepted;
  u.rejected_prediction_tokens = r.spec.num_prediction_drafted - r.spec.num_prediction_accepted;
  u.stopped_by_kv_pool = r.stopped_by_kv_pool;
  u.max_tokens_clamped_to = r.max_tokens_clamped ? r.max_tokens : 0;
  u.tier = r.tier;
  u.tier.loaded_tokens = std::min(r.tier.loaded_tokens, u.cached_tokens);  // what the request reused of them
  u.tier.loaded_tokens_redis = std::min(r.tier.loaded_tokens_redis, u.tier.loaded_tokens);
  u.ttft_ms = t.first_token ? ms_between(t.arrival, *t.first_token) : 0;
  u.prefill_ms = t.first_token && t.first_scheduled ? ms_between(*t.first_scheduled, *t.first_token) : 0;
  u.total_ms = ms_between(t.arrival, RequestTimes::Clock::now());
  if (r.explanation) {
    const std::span<const TokenId> prompt(r.tokens.data(), r.num_prompt_tokens);
    u.reuse = describe_reuse(tokenizer_, *r.explanation, prompt, block_size_);
  }
  return u;
}

RequestOutput OutputProcessor::finish(Request& request, RequestOutput news) {
  auto it = sequences_.find(request.id);
  HEARTH_CHECK(it != sequences_.end(), "the output stage has no request {}", request.id.value);
  Sequence& seq = *it->second;
  RequestOutput out = std::move(news);
  out.id = request.id;
  out.finished = true;
  out.finish_reason = request.finish_reason;
  // A stop string already dropped what it held back; any other end flushes it.
  out.new_text += std::exchange(seq.held, {}) + seq.decoder.flush();
  out.usage = usage_of(request);
  out.num_cached_tokens = request.num_cached_tokens;
  out.stop_sequence = std::move(seq.matched_stop);
  out.tokens = std::move(request.tokens);
  sequences_.erase(it);
  return out;
}

}  // namespace hearth

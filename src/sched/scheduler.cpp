#include "sched/scheduler.h"

#include <algorithm>

namespace hearth {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {}

AdmissionLimits Scheduler::admission_limits() const {
  return {config_.max_model_len, kv_.block_size(), kv_.pool().num_blocks_total() - kv_.num_blocks_pinned(),
          config_.max_waiting};
}

SubmitResult<void> Scheduler::add_request(std::unique_ptr<Request> request) {
  Request& r = *request;
  HEARTH_CHECK(r.num_prompt_tokens == r.num_tokens(), "request {} has {} tokens but {} prompt tokens", r.id.value,
               r.num_tokens(), r.num_prompt_tokens);
  HEARTH_CHECK(!requests_.contains(r.id), "request id {} is already in use", r.id.value);
  HEARTH_TRY(check_admission(r.num_prompt_tokens, r.max_tokens, admission_limits(), num_waiting()));
  r.status = RequestStatus::kWaiting;
  waiting_.push_back(&r);
  requests_.emplace(r.id, std::move(request));
  return {};
}

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

Request* Scheduler::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

bool Scheduler::has_tier_waiting() const {
  return std::any_of(waiting_.begin(), waiting_.end(), [](const Request* r) { return r->tier.waiting; });
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int32_t budget = config_.max_batch_tokens;
  schedule_running(out, budget);
  // After a preemption the pool is short: admitting now would only thrash.
  if (out.preempted.empty()) schedule_waiting(out, budget);
  out.num_tokens = config_.max_batch_tokens - budget;
  return out;
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget) {
  // Decoding requests first, so a long prefill never stalls them; then chunks of running prefills.
  for (const bool decode_pass : {true, false}) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Request& r = *running_[i];
      const int32_t remaining = r.num_tokens() - r.num_computed_tokens;
      if (remaining <= 0 || (remaining == 1) != decode_pass) continue;
      if (decode_pass) {
        const int32_t k = draft(r, budget);
        if (k > 0) {
          out.chunks.push_back({&r, r.num_computed_tokens, 1 + k, true, k});
          budget -= 1 + k;
          continue;
        }
      }
      const int32_t n = std::min(remaining, budget);
      const Growth growth = make_room(r, n, out, budget);
      if (growth == Growth::kPreemptedItself) break;  // r was the newest running request
      if (growth == Growth::kStopped) continue;
      out.chunks.push_back({&r, r.num_computed_tokens, n, r.num_computed_tokens + n == r.num_tokens()});
      budget -= n;
    }
  }
}

int32_t Scheduler::draft(Request& r, int32_t budget) {
  r.spec.draft.clear();
  r.spec.draft_is_prediction = false;
  // A predicted output drafts whatever the mode (the client asked for it); auto's pause still applies.
  const bool predicted = !r.prediction.empty();
  if (!predicted && !r.speculative.enabled()) return 0;
  if (r.speculative.enabled() && !r.spec.wants_draft(r.speculative.mode)) return 0;
  // Emitted tokens are the accepted drafts plus one, so max_tokens bounds the draft at the tokens left less one; the
  // drafted tokens take positions [num_tokens, num_tokens + k), inside the context.
  const int32_t limit = std::min({r.spec.draft_limit(r.speculative), budget - 1,
                                  r.max_tokens - r.num_output_tokens() - 1, config_.max_model_len - r.num_tokens()});
  if (limit <= 0) return 0;
  int32_t k = 0;
  if (predicted) {
    const std::span<const TokenId> output = std::span<const TokenId>(r.tokens).subspan(r.num_prompt_tokens);
    k = prediction_draft(r.prediction, output, r.speculative.min_ngram, r.speculative.max_ngram, limit,
                         r.spec.prediction, r.spec.draft);
    r.spec.draft_is_prediction = k > 0;
  }
  if (k == 0 && r.speculative.mode == SpeculativeMode::kDraftModel) {
    k = drafter_ ? drafter_->propose(r.tokens, limit, r.spec.draft) : 0;
  } else if (k == 0 && r.speculative.enabled()) {
    k = prompt_lookup_draft(r.tokens, r.speculative.min_ngram, r.speculative.max_ngram, limit, r.spec.draft);
  }
  // A draft never preempts anyone: without the blocks now, this is a plain decode step. It leaves a block for each
  // other running request, so it does not take the block another's next token needs.
  const int32_t others = static_cast<int32_t>(running_.size()) - 1;
  if (k == 0 || kv_.num_blocks_needed(r.id, r.num_computed_tokens + 1 + k) + others > kv_.pool().num_blocks_free() ||
      !kv_.allocate_slots(r.id, r.num_computed_tokens + 1 + k)) {
    r.spec.draft.clear();
    return 0;
  }
  return k;
}

Scheduler::Growth Scheduler::make_room(Request& r, int32_t n, SchedulerOutput& out, int32_t& budget) {
  while (!kv_.allocate_slots(r.id, r.num_computed_tokens + n)) {
    if (running_.size() == 1) {
      // r runs alone, so everything but the pins is free or r's: preempting itself would only bring it back to the
      // same wall.
      stop_by_kv_pool(r, out);
      return Growth::kStopped;
    }
    Request& victim = *running_.back();
    preempt(victim, out, budget);
    if (&victim == &r) return Growth::kPreemptedItself;
  }
  return Growth::kGrown;
}

void Scheduler::stop_by_kv_pool(Request& r, SchedulerOutput& out) {
  r.stopped_by_kv_pool = true;
  out.stopped_by_kv_pool.push_back(r.id);
}

bool Scheduler::admit(Request& r, int32_t first_chunk) {
  // Explained before admission changes the pool (it may evict), with the same limit as admit(): the last prompt
  // token is always computed.
  std::optional<PrefixExplanation> explanation;
  if (r.num_cached_tokens < 0) explanation = explain(r);
  auto admitted =
      kv_.admit(r.id, r.cache_namespace, r.tokens, r.num_tokens(), r.use_cache, r.retention, first_chunk);
  if (!admitted) return false;
  r.num_computed_tokens = admitted->num_cached_tokens;
  r.num_branch_tokens = admitted->num_branch_tokens;
  if (r.num_cached_tokens < 0) {
    r.num_cached_tokens = admitted->num_cached_tokens;
    r.num_copied_tokens = admitted->num_copied_tokens;
    r.explanation = std::move(explanation);
  }
  r.status = RequestStatus::kRunning;
  r.admit_seq = next_admit_seq_++;
  return true;
}

PrefixExplanation Scheduler::explain(const Request& r) const {
  if (!r.use_cache) {
    PrefixExplanation e;
    e.reason = ReuseStop::kCacheDisabled;
    e.num_tokens = r.num_tokens() - 1;
    return e;
  }
  return kv_.explain_prefix(r.cache_namespace, r.tokens, r.num_tokens() - 1, r.other_namespaces);
}

const std::vector<BlockHash>& Scheduler::prompt_block_keys(Request& r) const {
  if (r.prompt_block_keys.empty()) {
    const int32_t bs = kv_.block_size();
    BlockHash parent = r.cache_namespace;
    for (int32_t begin = 0; begin + bs <= r.num_prompt_tokens; begin += bs) {
      parent = hash_block(parent, r.cache_namespace, std::span(r.tokens).subspan(begin, bs));
      r.prompt_block_keys.push_back(parent);
    }
  }
  return r.prompt_block_keys;
}

bool Scheduler::waits_for_shared_prefix(Request& r) const {
  if (!r.use_cache || r.num_cached_tokens >= 0) return false;  // only on first admission, with the cache
  const auto& keys = prompt_block_keys(r);
  if (keys.empty()) return false;
  const int32_t bs = kv_.block_size();
  const auto cached_blocks =
      static_cast<int32_t>(kv_.find_longest_prefix(r.cache_namespace, r.tokens, r.num_prompt_tokens - 1).blocks.size());
  for (Request* q : running_) {
    if (!q->use_cache || q->num_computed_tokens >= q->num_prompt_tokens) continue;
    const auto& q_keys = prompt_block_keys(*q);
    const auto shared = static_cast<int32_t>(
        std::mismatch(keys.begin(), keys.end(), q_keys.begin(), q_keys.end()).first - keys.begin());
    // q has yet to compute blocks r could then share: admitting r now would compute them twice.
    if (shared > cached_blocks && shared > q->num_computed_tokens / bs) return true;
  }
  return false;
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget) {
  while (budget > 0 && !waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_running) {
    Request& r = *waiting_.front();
    // In arrival order: a request at the head that must wait (for blocks, or for a shared prefix another request
    // is computing) holds back those behind it, so large requests are never starved by smaller ones.
    if (r.tier.waiting || waits_for_shared_prefix(r)) break;  // its blocks are coming back from a lower tier
    if (!admit(r, budget)) {
      // Nothing runs, so only pins hold blocks: r would wait for ever. The caller finishes it.
      if (running_.empty()) stop_by_kv_pool(r, out);
      break;
    }
    waiting_.pop_front();
    running_.push_back(&r);
    const int32_t n = std::min(r.num_tokens() - r.num_computed_tokens, budget);
    out.chunks.push_back({&r, r.num_computed_tokens, n, r.num_computed_tokens + n == r.num_tokens()});
    budget -= n;
  }
}

void Scheduler::preempt(Request& r, SchedulerOutput& out, int32_t& budget) {
  // A victim already planned for this step (a decode) gives its tokens back.
  for (auto it = out.chunks.begin(); it != out.chunks.end();) {
    if (it->request == &r) {
      budget += it->num_tokens;
      it = out.chunks.erase(it);
    } else {
      ++it;
    }
  }
  free_blocks(r);
  std::erase(running_, &r);
  r.status = RequestStatus::kWaiting;
  r.num_computed_tokens = 0;
  r.num_preemptions++;
  num_preemptions_++;
  waiting_.push_front(&r);
  out.preempted.push_back(r.id);
}

void Scheduler::free_blocks(Request& r) {
  kv_.release(r.id, r.tokens, r.num_computed_tokens);
}

std::unique_ptr<Request> Scheduler::take(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  std::erase(running_, r.get());
  std::erase(waiting_, r.get());
  return r;
}

std::unique_ptr<Request> Scheduler::finish(RequestId id, FinishReason reason) {
  auto r = take(id);
  if (!r) return nullptr;
  free_blocks(*r);
  r->status = RequestStatus::kFinished;
  r->finish_reason = reason;
  return r;
}

void Scheduler::append_verified(Request& r, TokenId token) {
  if (token != kNoToken && !r.is_stop_token(token)) r.tokens.push_back(token);
}

void Scheduler::end_verification(const ScheduledChunk& chunk, int32_t accepted) {
  Request& r = *chunk.request;
  const auto& draft = r.spec.draft;
  HEARTH_CHECK(static_cast<int32_t>(draft.size()) == chunk.num_draft, "request {}: a draft of {} tokens, {} planned",
               r.id.value, draft.size(), chunk.num_draft);
  // Row 0 is the pending token; row j > 0 holds draft[j - 1]'s K/V, valid when that token is now the request's.
  const int32_t first_draft_pos = chunk.pos_begin + chunk.num_tokens - chunk.num_draft;
  int32_t valid = chunk.num_tokens - chunk.num_draft;
  while (valid < chunk.num_tokens) {
    const int32_t pos = chunk.pos_begin + valid;
    if (pos >= r.num_tokens() || r.tokens[pos] != draft[pos - first_draft_pos]) break;
    ++valid;
  }
  r.num_computed_tokens = chunk.pos_begin + valid;
  kv_.truncate_slots(r.id, r.num_computed_tokens);
  kv_.cache_full_blocks(r.id, r.tokens, r.num_computed_tokens);
  r.spec.on_verified(r.speculative.mode, chunk.num_draft, accepted, row_cost_.ratio());
  r.spec.draft.clear();
}

void Scheduler::update(const SchedulerOutput& output, std::span<const TokenId> sampled) {
  size_t next_sample = 0;
  for (const ScheduledChunk& chunk : output.chunks) {
    Request& r = *chunk.request;
    if (chunk.num_draft > 0) continue;  // append_verified and end_verification
    r.num_computed_tokens += chunk.num_tokens;
    kv_.cache_full_blocks(r.id, r.tokens, r.num_computed_tokens);
    if (!chunk.needs_logits) continue;
    HEARTH_CHECK(next_sample < sampled.size(), "update() got {} sampled tokens, needs more", sampled.size());
    const TokenId token = sampled[next_sample++];
    if (token != kNoToken && !r.is_stop_token(token)) r.tokens.push_back(token);
  }
  HEARTH_CHECK(next_sample == sampled.size(), "update() got {} sampled tokens, used {}", sampled.size(), next_sample);
}

}  // namespace hearth

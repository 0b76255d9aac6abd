#pragma once
// Scheduler: continuous batching under a per-step token budget.
//
// Each step (schedule()):
//   1. running requests, oldest first, get their next tokens: one for a decoding request, a prefill chunk for
//      one still catching up. KV grows on demand, a block when a token needs one. A request that cannot get a
//      block preempts the newest running request (recompute: its blocks are released but stay cached, so resuming
//      is mostly a cache hit); the newest preempts itself. A request running alone that cannot get a block holds
//      all the pool less its pins can give: it is stopped (SchedulerOutput::stopped_by_kv_pool), never preempted,
//      so no request preempts itself and comes back in a cycle.
//   2. the rest of the budget admits waiting requests in arrival order, if the blocks of their tokens so far (after
//      prefix reuse) fit, each with a prefill chunk; max_tokens reserves nothing. A request whose leading blocks
//      another running request is still prefilling waits until they are computed, then shares them (one
//      computation for simultaneous arrivals). A head request that does not fit an otherwise empty pool (its pins
//      grew since it was queued) is stopped too, so nothing waits forever.
// After the forward pass, update() advances num_computed_tokens, registers full blocks in the prefix cache and
// appends sampled tokens. A waiting request whose blocks a lower tier is loading (Request::tier.waiting) is not
// admitted until they are back (the engine clears the flag), and holds back those behind it like any head. Finishing is the engine's decision (its output stage): it calls finish(). Every
// finished, aborted or preempted request leaves the pool through free_blocks(), the one release path.

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/admission.h"
#include "sched/request.h"
#include "util/result.h"

namespace hearth {

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // tokens per step, decode and prefill together
  int32_t max_running = 64;
  int32_t max_waiting = 256;  // waiting requests beyond this are rejected as overloaded
  int32_t max_model_len = 2048;
};

// One request's share of a step: tokens [pos_begin, pos_begin + num_tokens) of request->tokens.
struct ScheduledChunk {
  Request* request = nullptr;
  int32_t pos_begin = 0;
  int32_t num_tokens = 0;
  bool needs_logits = false;  // the chunk reaches the last token: sample from it
  // A decode step with a draft: the chunk's last num_draft tokens are request->spec.draft (not yet in
  // request->tokens), and every one of its 1 + num_draft rows needs logits. The engine verifies them and reports
  // the outcome through append_verified() and end_verification(), not update().
  int32_t num_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<RequestId> preempted;
  // Requests the pool can never give their next blocks (Request::stopped_by_kv_pool is set): the caller finishes
  // them (FinishReason::kLength) before running the step. None of them is in `chunks`.
  std::vector<RequestId> stopped_by_kv_pool;
  int32_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a request. Requires a fresh id and tokens == the prompt. Fails (check_admission) with the numbers when it
  // can never run (empty, prompt or prompt + max_tokens beyond the context, prompt + 1 token needing more blocks
  // than the pool less its pins) or when the waiting queue is full (overloaded).
  [[nodiscard]] SubmitResult<void> add_request(std::unique_ptr<Request> request);
  // The limits add_request checks, with the pool's current pins.
  AdmissionLimits admission_limits() const;

  // Plans one step. Empty when there is nothing to do.
  SchedulerOutput schedule();

  // Applies a step's results: `sampled` holds one token per chunk with needs_logits, in chunk order. Advances
  // num_computed_tokens, caches newly full blocks and appends each sampled token unless it is a stop token or
  // kNoToken. Finishes nothing: the caller decides (token_finish_reason, stop strings) and calls finish().
  void update(const SchedulerOutput& output, std::span<const TokenId> sampled);

  // A draft chunk's verification (ScheduledChunk::num_draft > 0), one emitted token at a time: appends `token` to
  // the request's tokens unless it is a stop token or kNoToken, like update() does for a sampled token.
  void append_verified(Request& r, TokenId token);
  // Ends a draft chunk's verification: of its rows, those whose tokens are now in r.tokens keep their K/V
  // (num_computed_tokens advances over them); the rest (rejected draft tokens) are dropped: the blocks past the new
  // length go back to the pool, and only full blocks of accepted tokens are cached. `accepted`: drafted tokens that
  // equalled the picked ones (acceptance bookkeeping). Clears the draft.
  void end_verification(const ScheduledChunk& chunk, int32_t accepted);
  // The wall time of a step that computed `rows` decode and verify rows and no prompt token: what auto's break-even
  // acceptance is measured from (VerifyRowCost).
  void observe_decode_step(int32_t rows, double seconds) { row_cost_.observe(rows, seconds); }
  // The drafter of SpeculativeMode::kDraftModel (null: such requests decode plainly); outlives the scheduler's use.
  void set_drafter(Drafter* drafter) { drafter_ = drafter; }

  // Ends a request now (abort, stop string, disconnect) and releases its blocks. Returns it, or nullptr when
  // the id is unknown or already finished.
  std::unique_ptr<Request> finish(RequestId id, FinishReason reason);

  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  const Request* find(RequestId id) const;
  Request* find(RequestId id);
  // Waiting requests whose blocks are coming back from a lower tier (Request::tier.waiting).
  bool has_tier_waiting() const;

 private:
  void schedule_running(SchedulerOutput& out, int32_t& budget);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget);
  // Drafts r's next tokens when its speculation wants to (at most budget - 1, bounded by max_tokens, the context
  // and the blocks the pool can give now without preempting anyone); returns the draft's size (0: plain decode).
  int32_t draft(Request& r, int32_t budget);
  // Admits r with the KV for its first chunk of at most `first_chunk` tokens (window slabs, kv_cache_manager.h).
  bool admit(Request& r, int32_t first_chunk);
  PrefixExplanation explain(const Request& r) const;
  // True while a running request is still prefilling prompt blocks that `r` shares and could reuse once they
  // are computed: requests that arrive together with the same prefix compute it once, not once each.
  bool waits_for_shared_prefix(Request& r) const;
  const std::vector<BlockHash>& prompt_block_keys(Request& r) const;
  enum class Growth { kGrown, kPreemptedItself, kStopped };
  // Gives r blocks for its next n tokens, preempting the newest running requests as needed (see the top).
  Growth make_room(Request& r, int32_t n, SchedulerOutput& out, int32_t& budget);
  void stop_by_kv_pool(Request& r, SchedulerOutput& out);
  void preempt(Request& r, SchedulerOutput& out, int32_t& budget);
  void free_blocks(Request& r);
  std::unique_ptr<Request> take(RequestId id);

  SchedulerConfig config_;
  VerifyRowCost row_cost_;
  Drafter* drafter_ = nullptr;
  KvCacheManager& kv_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order, oldest first
  uint64_t next_admit_seq_ = 1;
  uint64_t num_preemptions_ = 0;
};

}  // namespace hearth

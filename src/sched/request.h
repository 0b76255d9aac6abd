#pragma once
// Request: one generation request as the scheduler sees it: token ids, limits, progress. No tensors, no text.
//
//   tokens:  [ prompt ................ | generated ...... ]
//            0                   num_prompt_tokens    tokens.size()
//   num_computed_tokens: how many leading tokens have K/V in the request's blocks. The scheduler's only job is
//   to make it catch up with tokens.size(); there is no separate prefill or decode phase.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/prefix_explain.h"
#include "kv/retention_queue.h"
#include "sched/sampling_params.h"
#include "sched/speculation.h"
#include "util/ids.h"

namespace hearth {

enum class RequestStatus { kWaiting, kRunning, kFinished };

enum class FinishReason { kNone, kStop, kLength, kAborted };

// A sampled "token" that is none: the engine could not sample (e.g. non-finite logits). Scheduler::update appends
// nothing for it, and the engine finishes the request.
inline constexpr TokenId kNoToken{-1};

// When a request arrived, was first scheduled and sampled its first token (set by the engine).
struct RequestTimes {
  using Clock = std::chrono::steady_clock;
  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
};

// Prompt blocks a lower tier (the disk) held beyond what the pool caches, and what the engine did about them: load
// them back when its measurements say reading is faster than recomputing (README "Tiers"), else recompute.
// The tiers below the pool, in the order a request loads from them.
enum class TierKind : uint8_t { kDisk, kRedis };

struct TierReuse {
  int32_t found_tokens = 0;        // full-block tokens the tiers held right after the pool's prefix
  int32_t found_tokens_redis = 0;  // of those, the Redis tier's
  bool load = false;               // the decision: load (true) or recompute
  double est_load_ms = 0;          // the estimates the decision compared
  double est_recompute_ms = 0;
  int32_t loaded_tokens = 0;       // tokens put back into the pool for this request
  int32_t loaded_tokens_redis = 0;  // of those, from the Redis tier
  uint8_t planned_tiers = 0;        // bit 1 << TierKind per tier whose stage was planned (each at most once)
  bool timed_out = false;          // the load took too long; the request went on without it
  // While set the scheduler does not admit the request: its blocks are on their way from the tier.
  bool waiting = false;
  std::chrono::steady_clock::time_point deadline;
  uint64_t job = 0;
};

struct Request {
  RequestId id;
  std::vector<TokenId> tokens;
  int32_t num_prompt_tokens = 0;
  SamplingParams sampling;
  int32_t max_tokens = 16;              // generated tokens allowed
  bool max_tokens_clamped = false;      // max_tokens is the context's room, less than the request asked for
  std::vector<TokenId> stop_token_ids;  // end the request without emitting the token
  BlockHash cache_namespace;
  bool use_cache = true;
  std::vector<RetentionSpan> retention;     // of the leading blocks (KvCacheManager::admit)
  std::vector<BlockHash> other_namespaces;  // tried when explaining a miss as different_salt

  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = -1;  // prompt tokens reused at first admission (-1: not admitted yet)
  int32_t num_copied_tokens = 0;   // of those, copied from a partially matching block
  // A hybrid model whose hit was cut back to a block with a state checkpoint: the full-block tokens the pool's KV
  // matched before the cut (0: no cut), where a new checkpoint lets the next request branching there resume.
  int32_t num_branch_tokens = 0;
  // Hybrid models: prompt positions where other prompts may branch (RequestSpec::checkpoint_hints and the
  // retention spans' ends): a state checkpoint is kept at the block boundary at or before each.
  std::vector<int32_t> checkpoint_hints;
  int32_t num_preemptions = 0;
  // The KV pool (less its pins) has no block for the request's next token and nothing is left to preempt: the
  // scheduler lists it in SchedulerOutput::stopped_by_kv_pool and the engine finishes it (length).
  bool stopped_by_kv_pool = false;
  uint64_t admit_seq = 0;                        // admission order; the newest is preempted first
  std::optional<PrefixExplanation> explanation;  // why reuse stopped, set at first admission
  std::vector<BlockHash> prompt_block_keys;      // keys of the prompt's full blocks, computed when first needed
  RequestTimes times;
  TierReuse tier;
  // Speculative decoding (sched/speculation.h): the request's mode (kOff for hybrid models: their recurrent state
  // cannot roll back a rejected draft) and its drafts and acceptance so far.
  SpeculativeParams speculative;
  SpeculationState spec;
  // A predicted output (RequestSpec::prediction): drafted from whatever the mode; empty for hybrid models.
  std::vector<TokenId> prediction;

  int32_t num_output_tokens() const { return static_cast<int32_t>(tokens.size()) - num_prompt_tokens; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  bool is_stop_token(TokenId token) const;
};

// The finish a sampled token implies by the request's token limits, once Scheduler::update has applied it: kStop
// for a stop token (never appended), kLength once max_tokens are generated, else kNone. Stop strings are text and
// are the engine's to check.
[[nodiscard]] FinishReason token_finish_reason(const Request& r, TokenId sampled);

}  // namespace hearth

#pragma once
// Request: one generation request as the scheduler sees it: token ids, limits, progress. No tensors, no text.
//
//   tokens:  [ prompt ................ | generated ...... ]
//            0                   num_prompt_tokens    tokens.size()
//   num_computed_tokens: how many leading tokens have K/V in the request's blocks. The scheduler's only job is
//   to make it catch up with tokens.size(); there is no separate prefill or decode phase.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/prefix_explain.h"
#include "sched/sampling_params.h"
#include "util/ids.h"

namespace hearth {

enum class RequestStatus { kWaiting, kRunning, kFinished };

enum class FinishReason { kNone, kStop, kLength, kAborted };

const char* finish_reason_name(FinishReason reason);

struct Request {
  RequestId id;
  std::vector<TokenId> tokens;
  int32_t num_prompt_tokens = 0;
  SamplingParams sampling;
  int32_t max_tokens = 16;               // generated tokens allowed
  std::vector<TokenId> stop_token_ids;  // end the request without emitting the token
  BlockHash cache_namespace;
  bool use_cache = true;
  std::vector<BlockHash> other_namespaces;  // tried when explaining a miss as different_salt

  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = -1;  // prompt tokens reused at first admission (-1: not admitted yet)
  int32_t num_copied_tokens = 0;   // of those, copied from a partially matching block
  int32_t num_preemptions = 0;
  uint64_t admit_seq = 0;  // admission order; the newest is preempted first
  std::optional<PrefixExplanation> explanation;  // why reuse stopped, set at first admission
  std::vector<BlockHash> prompt_block_keys;  // keys of the prompt's full blocks, computed when first needed

  int32_t num_output_tokens() const { return static_cast<int32_t>(tokens.size()) - num_prompt_tokens; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace hearth

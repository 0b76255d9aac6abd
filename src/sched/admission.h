#pragma once
// The limits a request must fit before it is queued, as one pure function: the scheduler applies it to every
// request it queues, and EngineLoop::submit applies it on the caller's thread to the numbers the loop last
// published, so a request that can never run is refused at once without waiting for an engine step.

#include <cstdint>

#include "sched/submit_error.h"

namespace hearth {

struct AdmissionLimits {
  int32_t max_model_len = 0;  // the context: prompt + generated tokens
  int32_t block_size = 16;
  int32_t num_blocks_usable = 0;  // the pool less what pins hold
  int32_t max_waiting = 0;        // queued requests beyond this are refused as overloaded
};

// Ok when a request of `num_prompt_tokens` that may generate `max_tokens` fits the context, its prompt plus one
// generated token fits the pool (max_tokens is a limit, not a reservation: KV grows on demand), and the queue (now
// `num_waiting` long) has room; else the kind of failure with the numbers.
[[nodiscard]] SubmitResult<void> check_admission(int32_t num_prompt_tokens, int32_t max_tokens,
                                                 const AdmissionLimits& limits, int32_t num_waiting);

}  // namespace hearth

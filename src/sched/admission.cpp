#include "sched/admission.h"

namespace hearth {

SubmitResult<void> check_admission(int32_t n_prompt, int32_t max_tokens, const AdmissionLimits& limits,
                                   int32_t num_waiting) {
  using enum SubmitErrorCode;
  if (n_prompt <= 0) return submit_error(kEmptyPrompt, "the prompt is empty");
  if (max_tokens < 1) return submit_error(kInvalidMaxTokens, "max_tokens must be at least 1, got {}", max_tokens);
  if (n_prompt > limits.max_model_len) {
    return submit_error(kPromptTooLong, "the prompt is {} tokens, longer than the model context of {} tokens", n_prompt,
                        limits.max_model_len);
  }
  const int64_t total = static_cast<int64_t>(n_prompt) + max_tokens;
  if (total > limits.max_model_len) {
    return submit_error(kContextExceeded,
                        "the prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds the model context of {} tokens",
                        n_prompt, max_tokens, total, limits.max_model_len);
  }
  // KV grows on demand: only the prompt and the slot of the first generated token must fit. max_tokens is a limit,
  // not a reservation; a request that later outgrows the pool is stopped with finish_reason length (Scheduler).
  const int32_t bs = limits.block_size;
  const int64_t tokens_needed = static_cast<int64_t>(n_prompt) + 1;
  const int64_t blocks_needed = (tokens_needed + bs - 1) / bs;
  if (blocks_needed > limits.num_blocks_usable) {
    return submit_error(kExceedsKvPool,
                        "the prompt ({} tokens) and its first generated token need {} KV blocks ({} tokens per "
                        "block) but the KV pool has only {} usable blocks ({} tokens); shorten the prompt or raise "
                        "--kv-memory",
                        n_prompt, blocks_needed, bs, limits.num_blocks_usable,
                        static_cast<int64_t>(limits.num_blocks_usable) * bs);
  }
  if (num_waiting >= limits.max_waiting) {
    return submit_error(kOverloaded, "server overloaded: {} requests are already waiting (--max-queue {})", num_waiting,
                        limits.max_waiting);
  }
  return {};
}

}  // namespace hearth

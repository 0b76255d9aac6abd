#pragma once
// generate(): one prompt, one sequence, start to finish. This is the `hearth generate` path and the golden
// reference the batched engine is tested against.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "sched/request.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace hearth {

struct GenerateOptions {
  int32_t max_tokens = 64;
  SamplingParams sampling;
  int32_t block_size = 16;
  KvFormat kv_format;  // f32 K and V: the reference precision
  bool stop_at_eos = true;
};

struct GenerateResult {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> output_tokens;
  std::string text;  // decoded output only, without the prompt
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_ms = 0;
  double decode_ms = 0;
};

// Tokenizes `prompt` (with BOS), prefills it, then samples up to max_tokens tokens, calling on_text with each
// complete UTF-8 piece as it is produced. Fails, with the numbers, when prompt + max_tokens exceeds the
// model's context, or when options are out of range.
[[nodiscard]] Result<GenerateResult> generate(Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                                              const GenerateOptions& options, ThreadPool& pool,
                                              const std::function<void(std::string_view)>& on_text = {});

}  // namespace hearth

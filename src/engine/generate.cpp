#include "engine/generate.h"

#include <chrono>

namespace hearth {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Result<void> check_limits(const ModelConfig& c, size_t n_prompt, const GenerateOptions& o) {
  HEARTH_TRY(o.sampling.validate());
  if (o.max_tokens < 0) return make_error("max_tokens {} must be >= 0", o.max_tokens);
  if (o.block_size <= 0 || o.block_size > 4096) return make_error("block size {} is out of range", o.block_size);
  if (n_prompt > static_cast<size_t>(c.n_ctx_train)) {
    return make_error("prompt is {} tokens, longer than the model context of {} tokens", n_prompt, c.n_ctx_train);
  }
  if (n_prompt + o.max_tokens > static_cast<size_t>(c.n_ctx_train)) {
    return make_error("prompt ({} tokens) + max_tokens ({}) = {} exceeds the model context of {} tokens", n_prompt,
                      o.max_tokens, n_prompt + o.max_tokens, c.n_ctx_train);
  }
  return {};
}

}  // namespace

Result<GenerateResult> generate(Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                                const GenerateOptions& options, ThreadPool& pool,
                                const std::function<void(std::string_view)>& on_text) {
  const ModelConfig& c = model.config();
  if (c.encoder) {
    return make_error("{} is an embedding model ({} encoder): it generates no text (serve it for /v1/embeddings)",
                      model.file().name(), c.architecture);
  }
  GenerateResult result;
  result.prompt_tokens = tokenizer.encode(prompt, /*add_bos=*/true);
  if (result.prompt_tokens.empty()) return make_error("prompt is empty and the model adds no BOS token");
  HEARTH_TRY(check_limits(c, result.prompt_tokens.size(), options));

  // One sequence owns a contiguous run of blocks; the paged block pool replaces this in the engine.
  const int32_t n_positions = static_cast<int32_t>(result.prompt_tokens.size()) + options.max_tokens;
  const int32_t n_blocks = (n_positions + options.block_size - 1) / options.block_size;
  auto storage = KvStorage::create(c.kv_shape(), options.kv_format, options.block_size, n_blocks);
  if (!storage) return storage.error();
  KvStorage& kv = **storage;
  if (c.is_hybrid()) kv.reserve_state_slots(1, c.recurrent_state_floats());  // the one sequence's slot 0
  std::vector<BlockId> block_table;
  for (int32_t b = 0; b < n_blocks; ++b) block_table.push_back(BlockId{b});

  Sampler sampler(options.sampling, result.prompt_tokens);
  IncrementalDecoder decoder(tokenizer);
  // The decoder sees the prompt first, so the first generated piece keeps its leading space and a UTF-8
  // character split across the prompt/output boundary is still completed correctly.
  for (TokenId t : result.prompt_tokens) (void)decoder.push(t);
  auto start = std::chrono::steady_clock::now();
  BatchSequence seq{0, static_cast<int32_t>(result.prompt_tokens.size()), 0, block_table, true};
  std::span<const float> logits = model.forward({result.prompt_tokens, {&seq, 1}}, kv, pool);
  result.prefill_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  int32_t pos = seq.n_tokens;
  for (int32_t i = 0; i < options.max_tokens; ++i) {
    const TokenId next = sampler.sample(logits);
    if (options.stop_at_eos && next == tokenizer.eos()) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
    result.output_tokens.push_back(next);
    const std::string piece = decoder.push(next);
    result.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (i + 1 == options.max_tokens) break;  // the last token needs no forward pass
    BatchSequence step{0, 1, pos++, block_table, true};
    logits = model.forward({{&result.output_tokens.back(), 1}, {&step, 1}}, kv, pool);
  }
  const std::string tail = decoder.flush();
  result.text += tail;
  if (on_text && !tail.empty()) on_text(tail);
  result.decode_ms = ms_since(start);
  return result;
}

}  // namespace hearth

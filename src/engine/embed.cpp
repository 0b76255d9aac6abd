// Engine::embed (engine.h): embeddings computed between steps on blocks borrowed from the pool.
//
//   check every input (empty, ids, context, pool) ─► loop: admit inputs while the next forward has rows left
//   (no cache: use_cache false, so nothing is shared or registered) ─► one forward_hidden over up to
//   max_batch_tokens rows (the first admitted input may be a later chunk of a long one) ─► pool each sequence's
//   rows into its vector (pooling.h) ─► finish and release the inputs whose last token ran.
//
// Encoders (bert, nomic-bert) attend bidirectionally, so an input is never chunked: each must fit one forward
// (max_batch_tokens) and is admitted only when it fits the forward being filled. Their blocks are never shared or
// registered either (use_cache false): a prefix's states depend on the tokens after it.

#include <algorithm>

#include "engine/engine.h"
#include "model/config.h"
#include "model/model.h"
#include "util/log.h"

namespace hearth {

std::string embedding_refusal(const ModelConfig& model, PoolingType pooling, const KvPlan& plan,
                              const std::string& file_name) {
  if (pooling == PoolingType::kNone) {
    return fmt::format(
        "{} is not an embedding model: its GGUF has no {}.pooling_type (serve an embedding model such as "
        "Qwen3-Embedding, or start hearth serve with --pooling mean|cls|last to pool this model's hidden states)",
        file_name, model.architecture);
  }
  if (pooling == PoolingType::kRank) {
    return fmt::format("{} is a reranker (pooling_type rank), not an embedding model", file_name);
  }
  if (model.is_hybrid()) {
    return fmt::format("embeddings of hybrid recurrent models ({}) are not supported", model.architecture);
  }
  if (plan.window.window_tokens > 0) {
    return fmt::format(
        "embeddings of {} are not supported with sliding-window KV slabs (serve it with --kv-full-window)", file_name);
  }
  return {};
}

SubmitResult<void> Engine::check_embedding_inputs(std::span<const std::vector<TokenId>> inputs) const {
  using enum SubmitErrorCode;
  const int32_t block_size = info_.block_size;
  const int64_t usable_blocks = int64_t{kv_->pool().num_blocks_total()} - kv_->num_blocks_pinned();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<TokenId>& tokens = inputs[i];
    if (tokens.empty()) return submit_error(kEmptyPrompt, "input {} has no tokens", i);
    for (TokenId t : tokens) {
      if (t.value < 0 || t.value >= info_.vocab_size) {
        return submit_error(kInvalidToken, "input {}: token id {} is outside the vocabulary of {}", i, t.value,
                            info_.vocab_size);
      }
    }
    if (tokens.size() > static_cast<size_t>(info_.n_ctx)) {
      return submit_error(kPromptTooLong, "input {} has {} tokens; the model's context is {}", i, tokens.size(),
                          info_.n_ctx);
    }
    if (model_.config().encoder && tokens.size() > static_cast<size_t>(config_.max_batch_tokens)) {
      return submit_error(kPromptTooLong,
                          "input {} has {} tokens; an encoder ({}) embeds each input whole in one forward of at most "
                          "{} tokens (raise --max-batch-tokens)",
                          i, tokens.size(), model_.config().architecture, config_.max_batch_tokens);
    }
    const int64_t blocks = (static_cast<int64_t>(tokens.size()) + block_size - 1) / block_size;
    if (blocks > usable_blocks) {
      return submit_error(kExceedsKvPool, "input {} needs {} KV blocks; the pool has {} (less pins)", i, blocks,
                          usable_blocks);
    }
  }
  return {};
}

void Engine::embed_forward(std::span<const std::vector<TokenId>> inputs, std::vector<EmbedSequence>& active,
                           Embeddings& out) {
  batch_tokens_.clear();
  batch_seqs_.clear();
  int32_t rows = 0;
  for (const EmbedSequence& a : active) {
    const std::vector<TokenId>& tokens = inputs[a.input];
    const int32_t take =
        std::min<int32_t>(static_cast<int32_t>(tokens.size()) - a.num_done, config_.max_batch_tokens - rows);
    if (take <= 0) break;
    HEARTH_CHECK(!model_.config().encoder || (a.num_done == 0 && take == static_cast<int32_t>(tokens.size())),
                 "an encoder's input must run whole in one forward");
    BatchSequence seq;
    seq.first_row = rows;
    seq.n_tokens = take;
    seq.pos_begin = a.num_done;
    seq.block_table = kv_->block_table(a.id);
    batch_seqs_.push_back(seq);
    batch_tokens_.insert(batch_tokens_.end(), tokens.begin() + a.num_done, tokens.begin() + a.num_done + take);
    rows += take;
  }
  const std::span<const float> hidden = model_.forward_hidden({batch_tokens_, batch_seqs_}, *storage_, pool_);
  const int32_t dim = model_.config().dim;
  const PoolingType pooling = *pooling_from_name(info_.embedding_pooling);
  for (size_t s = 0; s < batch_seqs_.size(); ++s) {
    const BatchSequence& seq = batch_seqs_[s];
    EmbedSequence& a = active[s];
    const auto n_total = static_cast<int32_t>(inputs[a.input].size());
    pool_rows(pooling,
              hidden.subspan(static_cast<size_t>(seq.first_row) * dim, static_cast<size_t>(seq.n_tokens) * dim), dim,
              seq.pos_begin, n_total, out[a.input]);
    a.num_done += seq.n_tokens;
    if (a.num_done == n_total) {
      finish_pooling(pooling, n_total, out[a.input]);
      kv_->release(a.id);
    }
  }
  std::erase_if(active,
                [&](const EmbedSequence& a) { return a.num_done == static_cast<int32_t>(inputs[a.input].size()); });
}

SubmitResult<Embeddings> Engine::embed(std::span<const std::vector<TokenId>> inputs) {
  HEARTH_CHECK(info_.embedding_refusal.empty(), "embed: {}", info_.embedding_refusal);
  if (auto checked = check_embedding_inputs(inputs); !checked) return checked.error();
  Embeddings out(inputs.size(), std::vector<float>(static_cast<size_t>(info_.embedding_dim), 0.0f));
  std::vector<EmbedSequence> active;
  const BlockHash ns = cache_namespace("");
  size_t next = 0;
  while (next < inputs.size() || !active.empty()) {
    int64_t rows_wanted = 0;
    for (const EmbedSequence& a : active) rows_wanted += static_cast<int64_t>(inputs[a.input].size()) - a.num_done;
    while (next < inputs.size() && rows_wanted < config_.max_batch_tokens) {
      const auto n = static_cast<int32_t>(inputs[next].size());
      // An encoder attends bidirectionally: an input is admitted only when it fits this forward whole.
      if (model_.config().encoder && rows_wanted + n > config_.max_batch_tokens) break;
      const RequestId id{next_request_id_++};
      if (!kv_->admit(id, ns, inputs[next], n, /*use_cache=*/false)) break;
      active.push_back({next, id, 0});
      rows_wanted += n;
      ++next;
    }
    if (active.empty()) {
      return submit_error(SubmitErrorCode::kOverloaded,
                          "the KV pool has no room for input {} ({} tokens) now: running requests hold {} of {} "
                          "blocks; retry later",
                          next, inputs[next].size(), kv_->pool().num_blocks_in_use(), kv_->pool().num_blocks_total());
    }
    embed_forward(inputs, active, out);
  }
  return out;
}

}  // namespace hearth

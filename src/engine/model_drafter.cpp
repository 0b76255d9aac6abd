#include "engine/model_drafter.h"

#include <algorithm>

namespace hearth {

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::create(Model& draft_model, const Tokenizer& draft_tokenizer,
                                                           const Tokenizer& target_tokenizer, EngineConfig config,
                                                           ThreadPool& pool) {
  if (draft_tokenizer.vocab_size() != target_tokenizer.vocab_size()) {
    return make_error("the draft model's vocabulary has {} tokens, the model's {}: a draft must share the vocabulary",
                      draft_tokenizer.vocab_size(), target_tokenizer.vocab_size());
  }
  for (int32_t t = 0; t < target_tokenizer.vocab_size(); ++t) {
    if (draft_tokenizer.token_text(TokenId{t}) != target_tokenizer.token_text(TokenId{t})) {
      return make_error("the draft model's token {} is '{}', the model's '{}': a draft must share the vocabulary", t,
                        draft_tokenizer.token_text(TokenId{t}), target_tokenizer.token_text(TokenId{t}));
    }
  }
  config.speculative = {};
  config.drafter = nullptr;
  auto engine = Engine::create(draft_model, draft_tokenizer, config, pool);
  if (!engine) return make_error("draft model: {}", engine.error().message);
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(std::move(*engine)));
}

int32_t ModelDrafter::propose(std::span<const TokenId> tokens, int32_t limit, std::vector<TokenId>& draft) {
  draft.clear();
  const int32_t room = engine_->info().n_ctx - static_cast<int32_t>(tokens.size());
  limit = std::min(limit, room);
  if (limit <= 0 || tokens.empty()) return 0;
  RequestSpec spec;
  spec.prompt.assign(tokens.begin(), tokens.end());
  spec.sampling.temperature = 0.0f;  // greedy: the target's most likely token is the draft's best guess
  spec.max_tokens = limit;
  spec.strict_max_tokens = true;
  spec.ignore_eos = true;  // an end of turn is a token like any other: the target decides
  auto id = engine_->add_request(std::move(spec));
  if (!id) return 0;  // the draft engine is full or the request does not fit: no draft this step
  while (engine_->has_unfinished()) {
    for (RequestOutput& out : engine_->step()) draft.insert(draft.end(), out.new_tokens.begin(), out.new_tokens.end());
  }
  if (static_cast<int32_t>(draft.size()) > limit) draft.resize(static_cast<size_t>(limit));
  return static_cast<int32_t>(draft.size());
}

}  // namespace hearth

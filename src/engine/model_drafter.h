#pragma once
// ModelDrafter: speculative decoding's draft model (SpeculativeMode::kDraftModel, hearth serve --draft-model). A small
// model of the target's vocabulary runs in an engine of its own: its own KV pool and prefix cache, on the target's
// thread pool, called from the target's engine step. A proposal is one greedy request over the target request's
// tokens; the draft engine's prefix cache holds their full blocks from the previous proposal, so each proposal
// computes only the tokens accepted since (with the last partial block) and then `limit` greedy steps. The draft
// engine never touches the target's KV, and whatever it proposes is verified like any draft: the target's output is
// plain decoding's whatever the draft model says.

#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "sched/speculation.h"
#include "util/result.h"

namespace hearth {

class ModelDrafter final : public Drafter {
 public:
  // `config` is the draft engine's (its KV budget, block size); speculation in it is off. Refuses a draft model
  // whose vocabulary differs from the target's (its size, or any token's text), or one that cannot generate.
  [[nodiscard]] static Result<std::unique_ptr<ModelDrafter>> create(Model& draft_model,
                                                                    const Tokenizer& draft_tokenizer,
                                                                    const Tokenizer& target_tokenizer,
                                                                    EngineConfig config, ThreadPool& pool);

  int32_t propose(std::span<const TokenId> tokens, int32_t limit, std::vector<TokenId>& draft) override;

  const Engine& engine() const { return *engine_; }

 private:
  explicit ModelDrafter(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
  std::unique_ptr<Engine> engine_;
};

}  // namespace hearth

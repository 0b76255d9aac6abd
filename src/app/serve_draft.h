#pragma once
// hearth serve --draft-model: a small model of the served model's vocabulary that drafts for speculative decoding
// (engine/model_drafter.h), its KV pool carved out of --kv-memory.

#include <cstdint>
#include <memory>

#include "app/serve_flags.h"
#include "engine/model_drafter.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace hearth::app {

struct DraftModel {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ModelDrafter> drafter;
  int64_t kv_bytes = 0;  // the draft engine's pool, taken from --kv-memory
};

// The draft's KV budget: --draft-kv-memory, at most a quarter of `kv_bytes` (the served model keeps the rest).
[[nodiscard]] Result<int64_t> draft_kv_bytes(const ServeFlags& f, int64_t kv_bytes);

// Loads f.draft_model and its drafter (a vocabulary other than `target`'s is refused) on `pool`.
[[nodiscard]] Result<std::unique_ptr<DraftModel>> load_draft_model(const ServeFlags& f, const Tokenizer& target,
                                                                   int64_t draft_kv, ThreadPool& pool);

}  // namespace hearth::app

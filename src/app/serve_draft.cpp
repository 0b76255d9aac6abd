#include "app/serve_draft.h"

#include <algorithm>

#include "util/log.h"
#include "util/units.h"

namespace hearth::app {

Result<int64_t> draft_kv_bytes(const ServeFlags& f, int64_t kv_bytes) {
  auto asked = parse_bytes(f.draft_kv_memory);
  if (!asked) return make_error("--draft-kv-memory: {}", asked.error().message);
  if (*asked <= 0 || *asked > kv_bytes / 4) {
    return make_error("--draft-kv-memory {} must be above 0 and at most a quarter of the KV budget ({})",
                      format_bytes(static_cast<uint64_t>(std::max<int64_t>(*asked, 0))),
                      format_bytes(static_cast<uint64_t>(kv_bytes / 4)));
  }
  return *asked;
}

Result<std::unique_ptr<DraftModel>> load_draft_model(const ServeFlags& f, const Tokenizer& target, int64_t draft_kv,
                                                     ThreadPool& pool) {
  auto d = std::make_unique<DraftModel>();
  auto file = GgufFile::open(f.draft_model);
  if (!file) return make_error("--draft-model: {}", file.error().message);
  d->file = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(d->file);
  if (!model) return make_error("--draft-model: {}", model.error().message);
  d->model = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(*d->file);
  if (!tokenizer) return make_error("--draft-model: {}", tokenizer.error().message);
  d->tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
  EngineConfig config;
  config.block_size = f.block_size;
  config.kv_memory_bytes = draft_kv;
  config.max_batch_tokens = f.max_batch_tokens;
  config.model_id = "draft";
  auto drafter = ModelDrafter::create(*d->model, *d->tokenizer, target, config, pool);
  if (!drafter) return make_error("--draft-model {}: {}", f.draft_model, drafter.error().message);
  d->drafter = std::move(*drafter);
  d->kv_bytes = draft_kv;
  spdlog::info(
      "draft model {}: {} of weights, {} of KV (from --kv-memory); requests draft with it under "
      "\"speculative\": \"draft_model\"",
      f.draft_model, format_bytes(d->file->file_size()), format_bytes(static_cast<uint64_t>(draft_kv)));
  return d;
}

}  // namespace hearth::app

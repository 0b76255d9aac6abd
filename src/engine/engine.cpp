#include "engine/engine.h"

#include <algorithm>
#include <cmath>

#include "engine/explain.h"
#include "engine/kv_tiers.h"
#include "model/fingerprint.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/units.h"

namespace hearth {

SubmitResult<int32_t> check_request(const RequestSpec& spec, const EngineInfo& info, const AdmissionLimits& limits,
                                    int32_t num_waiting) {
  using enum SubmitErrorCode;
  // An encoder's blocks must never reach the prefix index (a prefix's states depend on the tokens after it), and it
  // has no LM head: no request is ever admitted.
  if (!info.generation_refusal.empty()) return SubmitError{kNotGenerative, info.generation_refusal};
  for (TokenId t : spec.prompt) {
    if (t.value < 0 || t.value >= info.vocab_size) {
      return submit_error(kInvalidToken, "token id {} is outside the vocabulary of {}", t.value, info.vocab_size);
    }
  }
  if (spec.prediction.size() > kMaxPredictionTokens) {
    return submit_error(kInvalidSampling, "the prediction is {} tokens; at most {} are allowed", spec.prediction.size(),
                        kMaxPredictionTokens);
  }
  for (TokenId t : spec.prediction) {
    if (t.value < 0 || t.value >= info.vocab_size) {
      return submit_error(kInvalidToken, "prediction token id {} is outside the vocabulary of {}", t.value,
                          info.vocab_size);
    }
  }
  if (auto valid = spec.sampling.validate(); !valid) return SubmitError{kInvalidSampling, valid.error().message};
  if (spec.speculative) {
    if (auto valid = spec.speculative->validate(); !valid) {
      return SubmitError{kInvalidSampling, valid.error().message};
    }
  }
  for (const auto& [token, bias] : spec.sampling.logit_bias) {
    if (token < 0 || token >= info.vocab_size) {
      return submit_error(kInvalidSampling, "logit_bias names token id {}, outside the vocabulary of {}", token,
                          info.vocab_size);
    }
  }
  for (const std::string& s : spec.stop) {
    if (s.empty()) return submit_error(kInvalidStop, "stop strings must not be empty");
    if (s.size() > kMaxStopBytes) {
      return submit_error(kInvalidStop, "a stop string is {} bytes; at most {} are allowed", s.size(), kMaxStopBytes);
    }
  }
  if (spec.top_logprobs && (*spec.top_logprobs < 0 || *spec.top_logprobs > kMaxTopLogprobs)) {
    return submit_error(kInvalidSampling, "top_logprobs {} is out of range [0, {}]", *spec.top_logprobs,
                        kMaxTopLogprobs);
  }
  if (spec.retention.size() > kMaxRetentionSpans) {
    return submit_error(kInvalidRetention, "{} retention spans, at most {}", spec.retention.size(), kMaxRetentionSpans);
  }
  for (const RetentionSpan& r : spec.retention) {
    if (r.priority > kMaxRetentionPriority || r.ttl_ms < 0 || r.ttl_ms > kMaxRetentionTtlMs || r.num_tokens < 0) {
      return submit_error(kInvalidRetention, "retention priority {} (0..{}), ttl {} ms (0..{}), tokens {} (>= 0)",
                          r.priority, kMaxRetentionPriority, r.ttl_ms, kMaxRetentionTtlMs, r.num_tokens);
    }
  }
  const auto n_prompt = static_cast<int32_t>(std::min<size_t>(spec.prompt.size(), INT32_MAX));
  if (spec.checkpoint_hints.size() > kMaxCheckpointHints) {
    return submit_error(kInvalidRetention, "{} checkpoint hints, at most {}", spec.checkpoint_hints.size(),
                        kMaxCheckpointHints);
  }
  for (const int32_t hint : spec.checkpoint_hints) {
    if (hint < 1 || hint > n_prompt) {
      return submit_error(kInvalidRetention, "checkpoint hint {} is outside the prompt [1, {}]", hint, n_prompt);
    }
  }
  int32_t max_tokens = 0;
  const int32_t room = info.n_ctx - n_prompt;
  if (spec.max_tokens && (spec.strict_max_tokens || *spec.max_tokens < 1)) {
    max_tokens = *spec.max_tokens;  // check_admission refuses what does not fit
  } else {
    if (n_prompt > 0 && room < 1) {
      return submit_error(kPromptTooLong,
                          "the prompt is {} tokens, but the model's context is {} tokens (at least one must remain "
                          "for the completion)",
                          n_prompt, info.n_ctx);
    }
    const std::optional<int32_t> asked = spec.max_tokens ? spec.max_tokens : spec.default_max_tokens;
    max_tokens = asked ? std::min(*asked, room) : room;
  }
  HEARTH_TRY(check_admission(n_prompt, max_tokens, limits, num_waiting));
  return max_tokens;
}

namespace {

// The tiers below the pool a hybrid model's checkpoints are written through to, in load order.
std::vector<BlockTier*> tier_list(const EngineConfig& c) {
  std::vector<BlockTier*> tiers;
  if (c.disk_tier != nullptr) tiers.push_back(c.disk_tier);
  if (c.redis_tier != nullptr) tiers.push_back(c.redis_tier);
  return tiers;
}

// The model's fingerprint (its weights' digest included), logged with what it cost.
std::string timed_fingerprint(const GgufFile& file) {
  const auto start = std::chrono::steady_clock::now();
  std::string fingerprint = model_fingerprint(file);
  spdlog::info("model fingerprint {} ({} of weights hashed in {:.0f} ms)", fingerprint.substr(0, 16),
               format_bytes(file.tensor_data_bytes()),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return fingerprint;
}

}  // namespace

KvWindowSplit kv_window_split(const ModelConfig& c, const EngineConfig& config) {
  KvWindowSplit split;
  if (!config.kv_window_slabs || c.sliding_window <= 0) return split;
  // Over the layers that store K/V, one flag per KvStorage plane (gemma4's shared-KV layers and a hybrid's recurrent
  // layers hold none).
  for (int32_t p = 0; p < c.n_kv_layers(); ++p) split.n_window_layers += c.is_local(c.layer_of_kv_plane(p)) ? 1 : 0;
  if (c.gemma4) {
    for (int32_t p = 0; p < c.n_kv_layers(); ++p) split.layers.push_back(c.is_local(c.layer_of_kv_plane(p)));
  }
  split.window_tokens = split.n_window_layers > 0 ? c.sliding_window : 0;
  split.plan_context = config.kv_window_plan_context;
  const int64_t bs = std::max(1, config.block_size);
  // One request's window (ceil((W - 1) / bs) + 1 blocks), its batch chunk (one more when unaligned) and a copy source.
  split.batch_slabs = (config.max_batch_tokens + bs - 1) / bs + 1;  // a step's chunks, one more when unaligned
  split.min_window_slabs = (split.window_tokens + bs - 2) / bs + 1 + split.batch_slabs + 1;
  if (split.n_window_layers == 0) split = {};
  return split;
}

Result<StateSplit> split_state_budget(const ModelConfig& c, const EngineConfig& config) {
  StateSplit s;
  s.kv_budget_bytes = config.kv_memory_bytes;
  if (!c.is_hybrid()) return s;
  s.state_bytes = c.recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
  s.running_slots = static_cast<int32_t>(
      std::clamp<int64_t>(config.kv_memory_bytes / 2 / s.state_bytes, 1, std::max(config.max_running, 1)));
  s.checkpoint_slots = config.state_checkpoints >= 0
                           ? config.state_checkpoints
                           : static_cast<int32_t>(std::min<int64_t>(config.kv_memory_bytes / 4 / s.state_bytes, 1 << 20));
  s.kv_budget_bytes = config.kv_memory_bytes - s.state_bytes * (s.running_slots + int64_t{s.checkpoint_slots});
  if (s.kv_budget_bytes <= 0) {
    return make_error(
        "KV budget {} holds no KV for this hybrid model after its recurrent states: {} per sequence × ({} running + {} "
        "checkpoints); raise --kv-memory or lower --max-running",
        format_bytes(config.kv_memory_bytes), format_bytes(s.state_bytes), s.running_slots, s.checkpoint_slots);
  }
  return s;
}

Result<std::unique_ptr<Engine>> Engine::create(Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                               ThreadPool& pool) {
  const ModelConfig& c = model.config();
  if (config.max_batch_tokens < 1) return make_error("max batch tokens must be >= 1");
  auto states = split_state_budget(c, config);
  if (!states) return states.error();
  const KvShape shape = c.kv_shape();
  auto cost = kv_token_cost(shape, config.kv_format);
  if (!cost) return cost.error();
  const KvWindowSplit split = kv_window_split(c, config);
  auto plan = plan_kv_pool(shape, *cost, config.block_size, states->kv_budget_bytes, split);
  if (!plan) return plan.error();
  std::vector<bool> window_layers;
  for (int32_t p = 0; p < c.n_kv_layers() && split.n_window_layers > 0; ++p) {
    window_layers.push_back(c.is_local(c.layer_of_kv_plane(p)));
  }
  auto storage = KvStorage::create(shape, config.kv_format, config.block_size, static_cast<int32_t>(plan->num_blocks),
                                   std::move(window_layers), static_cast<int32_t>(plan->num_window_slabs));
  if (!storage) return storage.error();
  HEARTH_CHECK(static_cast<int64_t>((*storage)->bytes_total()) == plan->pool_bytes,
               "KV storage holds {} bytes but the plan says {}", (*storage)->bytes_total(), plan->pool_bytes);
  EngineInfo info;
  info.model_id = config.model_id;
  std::string fingerprint = timed_fingerprint(model.file());
  info.listing = config.listing;
  info.listing.digest = fingerprint;
  model.release_packed_originals();  // the hash read every page of the mapping
  info.system_fingerprint = fmt::format("fp_{}_{}", fingerprint.substr(0, 12), HEARTH_BUILD_ID);
  info.n_ctx = c.n_ctx_train;
  info.vocab_size = tokenizer.vocab_size();
  info.block_size = config.block_size;
  info.max_waiting = config.max_waiting;
  info.kv_plan = *plan;
  info.weights_bytes = static_cast<int64_t>(model.file().tensor_data_bytes());
  info.kv_dtype_costs = kv_dtype_costs(shape, config.kv_format);
  info.state_bytes_per_sequence = states->state_bytes;
  info.num_state_running_slots = states->running_slots;
  info.num_state_checkpoint_slots = states->checkpoint_slots;
  const PoolingType pooling = config.pooling.value_or(c.pooling);
  info.embedding_refusal = embedding_refusal(c, pooling, info.kv_plan, model.file().name());
  if (info.embedding_refusal.empty()) {
    info.embedding_pooling = pooling_name(pooling);
    info.embedding_dim = c.dim;
  }
  if (c.encoder) {
    info.generation_refusal = fmt::format(
        "{} is an embedding model ({}, a bidirectional encoder with no language-model head): it serves "
        "/v1/embeddings and /api/embed, not chat or completions",
        model.file().name(), c.architecture);
  }
  if (c.is_hybrid()) {
    (*storage)->reserve_state_slots(states->running_slots + states->checkpoint_slots, c.recurrent_state_floats());
  }
  return std::unique_ptr<Engine>(
      new Engine(model, tokenizer, config, pool, std::move(info), std::move(fingerprint), std::move(*storage)));
}

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineConfig& config, ThreadPool& pool, EngineInfo info,
               std::string fingerprint, std::unique_ptr<KvStorage> storage)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      pool_(pool),
      info_(std::move(info)),
      fingerprint_(std::move(fingerprint)),
      storage_(std::move(storage)),
      outputs_(tokenizer, config.block_size) {
  for (int32_t t = 0; t < tokenizer.vocab_size(); ++t) {
    if (tokenizer.is_eog(TokenId{t})) eog_ids_.push_back(TokenId{t});
  }
  const auto num_blocks = static_cast<int32_t>(info_.kv_plan.num_blocks);
  std::function<bool(const BlockHash&)> resumable_after;
  int32_t max_running = config.max_running;
  if (info_.state_bytes_per_sequence > 0) {
    const DeltaNetConfig& d = model.config().delta_net;
    states_ = std::make_unique<RecurrentStates>(
        info_.num_state_running_slots, info_.num_state_checkpoint_slots, config.block_size, tier_list(config),
        fmt::format("recurrent-state-v1 f32 x{} ({} layers: conv {} x {}, {} heads of {}x{})",
                    model.config().recurrent_state_floats(), model.config().n_recurrent_layers(), d.d_conv - 1,
                    d.conv_channels(), d.n_v_heads, d.d_state, d.d_state));
    resumable_after = [states = states_.get()](const BlockHash& key) { return states->has_checkpoint(key); };
    max_running = info_.num_state_running_slots;
    spdlog::info("hybrid model: recurrent state {} per sequence; {} running slots, {} prefix-cache checkpoints ({}){}",
                 format_bytes(info_.state_bytes_per_sequence), info_.num_state_running_slots,
                 info_.num_state_checkpoint_slots,
                 format_bytes(info_.state_bytes_per_sequence *
                              (info_.num_state_running_slots + info_.num_state_checkpoint_slots)),
                 info_.num_state_checkpoint_slots == 0 ? "; prefix caching is OFF for this model (no checkpoint fits)"
                                                       : "");
  }
  kv_ = std::make_unique<KvCacheManager>(KvCacheConfig{
      .num_blocks = num_blocks,
      .block_size = config.block_size,
      .max_pinned_blocks = static_cast<int32_t>(num_blocks * config.max_pinned_fraction),
      .max_pinned_blocks_per_namespace = static_cast<int32_t>(num_blocks * config.max_pinned_fraction_per_salt),
      .clock = config.retention_clock,
      .window_tokens = info_.kv_plan.window.window_tokens,
      .num_window_slabs = static_cast<int32_t>(info_.kv_plan.num_window_slabs),
      .resumable_after = std::move(resumable_after)});
  if (info_.embedding_refusal.empty()) {
    spdlog::info("embeddings: {} pooling, {} dimensions (/v1/embeddings, /api/embed)", info_.embedding_pooling,
                 info_.embedding_dim);
  }
  spdlog::info("{} ({} blocks of {}; the model's full context is {} tokens)", describe_kv_plan(info_.kv_plan),
               num_blocks, config.block_size, info_.n_ctx);
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config.max_batch_tokens, max_running, config.max_waiting, info_.n_ctx}, *kv_);
  scheduler_->set_drafter(config.drafter);
  int64_t n_params = 0;
  for (const GgufTensor& t : model.file().tensors()) n_params += t.num_elements();
  tiers_ = std::make_unique<KvTiers>(
      config.disk_tier, *storage_, *kv_, n_params, config.tier_load_policy,
      KvTiers::RedisLink{config.redis_tier, config.redis_load_policy,
                         config.model_id.empty() ? fingerprint_.substr(0, 16) : config.model_id});
  if (config.kv_prefault) {
    prefaulter_ = std::make_unique<KvPrefaulter>(*storage_);
    prefaulter_->ahead_of(kv_->pool().high_water());
  }
}

Engine::~Engine() = default;

BlockHash Engine::cache_namespace(const std::string& cache_salt) const {
  return CacheNamespace{fingerprint_,        config_.kv_format.name(), config_.block_size, config_.adapter_id,
                        cache_salt,          Model::kernel_arithmetic()}
      .digest();
}

std::vector<BlockHash> Engine::other_namespaces(const BlockHash& ns) const {
  // Tenant isolation: only the unsalted namespace, which anyone can probe by sending the prompt without a salt.
  // A salted namespace is never consulted for another request, so no explanation can tell one tenant what another
  // has cached (counts included).
  const BlockHash unsalted = cache_namespace("");
  if (ns == unsalted) return {};
  return {unsalted};
}

CacheReport Engine::explain_prompt(std::span<const TokenId> prompt, const std::string& cache_salt,
                                   bool use_cache) const {
  CacheReport report;
  report.prompt_tokens = static_cast<int32_t>(prompt.size());
  PrefixExplanation e;
  if (use_cache) {
    const BlockHash ns = cache_namespace(cache_salt);
    e = kv_->explain_prefix(ns, prompt, report.prompt_tokens, other_namespaces(ns));
  } else {
    e.reason = ReuseStop::kCacheDisabled;
    e.num_tokens = report.prompt_tokens;
  }
  report.cached_tokens = e.reuse_stopped_at;
  report.cached_tokens_ram = e.reuse_stopped_at;
  if (use_cache) report.cached_tokens_disk = tiers_->tokens_in_tier(cache_namespace(cache_salt), prompt);
  report.reusable_tokens = std::min(e.reuse_stopped_at, std::max(0, report.prompt_tokens - 1));
  report.explanation = describe_reuse(tokenizer_, e, prompt, config_.block_size);
  return report;
}

Result<PinInfo> Engine::pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt) {
  const BlockHash ns = cache_namespace(cache_salt);
  auto pinned = kv_->pin_prefix(ns, prompt);
  if (pinned) tiers_->mark_pinned(ns, prompt, pinned->num_tokens);
  if (pinned && states_) states_->pin(pinned->key, ns, prompt, pinned->num_tokens);  // its checkpoint stays too
  return pinned;
}

SubmitResult<RequestId> Engine::add_request(RequestSpec spec) {
  auto max_tokens = check_request(spec, info_, scheduler_->admission_limits(), scheduler_->num_waiting());
  if (!max_tokens) return max_tokens.error();
  if (states_ && (!spec.prediction.empty() || (spec.speculative && spec.speculative->enabled()))) {
    // Asked for by this request (the server's default is not: that one just stays off here).
    return submit_error(SubmitErrorCode::kInvalidSampling,
                        "speculative decoding and predicted outputs are not supported on hybrid models (a recurrent "
                        "state cannot roll back a rejected draft): send no prediction and \"speculative\": \"off\"");
  }
  const SpeculativeMode mode = spec.speculative.value_or(config_.speculative).mode;
  if (mode == SpeculativeMode::kDraftModel && !config_.drafter && !states_) {
    return submit_error(SubmitErrorCode::kInvalidSampling,
                        "speculative mode draft_model needs a draft model (hearth serve --draft-model)");
  }
  auto request = std::make_unique<Request>();
  request->id = RequestId{next_request_id_++};
  request->times.arrival = RequestTimes::Clock::now();
  request->tokens = std::move(spec.prompt);
  request->num_prompt_tokens = request->num_tokens();
  request->sampling = spec.sampling;
  request->max_tokens = *max_tokens;
  request->max_tokens_clamped = spec.max_tokens && *max_tokens < *spec.max_tokens;
  if (!spec.ignore_eos) request->stop_token_ids = eog_ids_;
  request->use_cache = spec.use_cache;
  request->speculative = spec.speculative.value_or(config_.speculative);
  request->prediction = std::move(spec.prediction);
  if (states_) request->speculative.mode = SpeculativeMode::kOff;  // the server's default; a request's is refused
  request->retention = std::move(spec.retention);
  if (states_) {  // where other prompts may branch: the hints, and the ends of the retention spans
    request->checkpoint_hints = std::move(spec.checkpoint_hints);
    for (const RetentionSpan& span : request->retention) {
      if (span.num_tokens < request->num_prompt_tokens) request->checkpoint_hints.push_back(span.num_tokens);
    }
  }
  request->cache_namespace = cache_namespace(spec.cache_salt);
  request->other_namespaces = other_namespaces(request->cache_namespace);
  const RequestId id = request->id;
  if (states_)
    states_->load_from_tier(*request, *storage_,
                            config_.retention_clock());  // a checkpoint on disk, before its KV is planned
  tiers_->plan_load(*request);
  HEARTH_TRY(scheduler_->add_request(std::move(request)));
  outputs_.add(id, spec);
  if (spec.pin_prefix) pin_on_finish_.insert(id);
  return id;
}

void Engine::abort(RequestId id, std::optional<RuntimeError> cause) {
  if (scheduler_->find(id) == nullptr) return;
  pending_outputs_.push_back(finish_request(id, FinishReason::kAborted, {}, std::move(cause)));
  note_pool_clock();
}

EngineStats Engine::stats() const {
  const BlockPool& pool = kv_->pool();
  EngineStats s;
  s.num_blocks_total = pool.num_blocks_total();
  s.num_blocks_in_use = pool.num_blocks_in_use();
  s.num_blocks_pinned = kv_->num_blocks_pinned();
  s.num_blocks_cached = pool.num_blocks_cached();
  s.num_blocks_free = pool.num_blocks_free();
  s.num_blocks_cached_free = pool.num_blocks_cached_free();
  s.num_evictions = pool.num_evictions();
  s.num_window_slabs_total = pool.num_window_slabs_total();
  s.num_window_slabs_in_use = pool.num_window_slabs_in_use();
  s.num_window_slabs_idle = pool.num_window_slabs_idle();
  s.num_window_slab_evictions = pool.num_window_slab_evictions();
  for (int32_t p = 0; p <= kMaxRetentionPriority; ++p) {
    s.num_blocks_evictable_by_band[std::min(p / 25, 3)] += pool.num_blocks_evictable_at(p);
  }
  s.num_preemptions = scheduler_->num_preemptions();
  if (states_) {
    s.num_state_checkpoints = states_->num_checkpoints();
    s.num_state_checkpoints_written = states_->num_checkpoints_written();
    s.num_state_resumes = states_->num_resumes();
    s.num_state_tier_loads = states_->num_tier_loads();
  }
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting();
  s.num_cache_queries = kv_->counters().num_queries;
  s.num_cache_query_tokens = kv_->counters().num_query_tokens;
  s.num_cache_hit_tokens = kv_->counters().num_hit_tokens;
  s.num_cache_copied_tokens = kv_->counters().num_copied_tokens;
  s.num_steps = counters_.num_steps;
  s.num_prefill_tokens = counters_.num_prefill_tokens;
  s.num_decode_tokens = counters_.num_decode_tokens;
  s.num_finished = counters_.num_finished;
  s.num_drafted_tokens = counters_.num_drafted_tokens;
  s.num_accepted_tokens = counters_.num_accepted_tokens;
  if (tiers_->disk() != nullptr) s.disk = tiers_->disk()->stats();
  if (tiers_->redis() != nullptr) s.redis = tiers_->redis()->stats();
  if (tiers_->enabled()) s.tier_link = tiers_->counters();
  return s;
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs = std::exchange(pending_outputs_, {});
  tiers_->apply_loads(*scheduler_);
  // A step's cost for VerifyRowCost: scheduling included, where a draft model proposes its drafts.
  const auto start = std::chrono::steady_clock::now();
  const uint64_t prefill_before = counters_.num_prefill_tokens;
  const SchedulerOutput plan = scheduler_->schedule();
  if (states_) {
    for (RequestId id : plan.preempted) states_->forget(id);  // resumes from a checkpoint, or recomputes
  }
  for (RequestId id : plan.stopped_by_kv_pool) outputs.push_back(finish_request(id, FinishReason::kLength));
  if (plan.chunks.empty()) {
    if (scheduler_->has_tier_waiting()) tiers_->wait_for_loads();
    return outputs;
  }
  counters_.num_steps++;
  mark_scheduled(plan);
  apply_block_copies();
  const std::span<const float> logits = run_batch(plan);  // valid until the next forward
  const std::vector<TokenId> sampled = sample(plan, logits);
  scheduler_->update(plan, sampled);
  tiers_->persist_new_blocks();
  if (prefaulter_) prefaulter_->ahead_of(kv_->pool().high_water());
  process_outputs(plan, sampled, logits, outputs);  // verifies drafts row by row
  if (counters_.num_prefill_tokens == prefill_before) {  // decode and verify rows only: what a row costs
    scheduler_->observe_decode_step(static_cast<int32_t>(batch_tokens_.size()),
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // Blocks a verified draft filled were registered just now: copied out before the next step allocates.
  if (std::any_of(plan.chunks.begin(), plan.chunks.end(), [](const ScheduledChunk& c) { return c.num_draft > 0; })) {
    tiers_->persist_new_blocks();
  }
  note_pool_clock();
  return outputs;
}

void Engine::mark_scheduled(const SchedulerOutput& plan) {
  const auto now = RequestTimes::Clock::now();
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.request->times.first_scheduled) chunk.request->times.first_scheduled = now;
  }
}

void Engine::apply_block_copies() {
  for (const BlockCopy& copy : kv_->pending_copies()) {
    storage_->copy_slots(copy.dst, copy.src, copy.n_slots, copy.dst_slab, copy.src_slab);
  }
  kv_->complete_copies();
}

std::span<const float> Engine::run_batch(const SchedulerOutput& plan) {
  batch_tokens_.clear();
  batch_seqs_.clear();
  const uint64_t prefill_before = counters_.num_prefill_tokens;
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& r = *chunk.request;
    BatchSequence seq;
    seq.first_row = static_cast<int32_t>(batch_tokens_.size());
    seq.n_tokens = chunk.num_tokens;
    seq.pos_begin = chunk.pos_begin;
    seq.block_table = kv_->block_table(r.id);
    seq.window_table = kv_->window_table(r.id);
    seq.want_logits = chunk.needs_logits;
    const int32_t n_known = chunk.num_tokens - chunk.num_draft;  // the rest is the draft
    batch_tokens_.insert(batch_tokens_.end(), r.tokens.begin() + chunk.pos_begin,
                         r.tokens.begin() + chunk.pos_begin + n_known);
    batch_tokens_.insert(batch_tokens_.end(), r.spec.draft.begin(), r.spec.draft.begin() + chunk.num_draft);
    seq.n_logits = 1 + chunk.num_draft;
    if (states_) seq.state_slot = states_->acquire(r, chunk.pos_begin, chunk.num_tokens, *storage_);
    batch_seqs_.push_back(seq);
    if (chunk.needs_logits) {
      counters_.num_decode_tokens += r.num_computed_tokens >= r.num_prompt_tokens ? 1 : 0;
    }
    const int32_t prompt_end = std::min(chunk.pos_begin + chunk.num_tokens, r.num_prompt_tokens);
    counters_.num_prefill_tokens += std::max(0, prompt_end - chunk.pos_begin);
  }
  if (states_) {  // after every restore above, so no checkpoint a hit resumes from is evicted first
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ScheduledChunk& chunk = plan.chunks[i];
      batch_seqs_[i].checkpoints =
          states_->plan_checkpoints(*chunk.request, chunk.pos_begin, chunk.num_tokens, config_.retention_clock());
    }
  }
  checkpoint_requests_.clear();
  if (states_) {
    for (const ScheduledChunk& chunk : plan.chunks) checkpoint_requests_.push_back(chunk.request);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::span<const float> logits = model_.forward({batch_tokens_, batch_seqs_}, *storage_, pool_);
  for (size_t i = 0; i < checkpoint_requests_.size(); ++i) {  // write-through of the checkpoints just written
    for (const BatchSequence::StateCheckpoint& ckpt : batch_seqs_[i].checkpoints) {
      states_->persist(*checkpoint_requests_[i], ckpt, *storage_);
    }
  }
  tiers_->observe_prefill(static_cast<int64_t>(counters_.num_prefill_tokens - prefill_before),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return logits;
}

TokenId Engine::sample_row(const Request& r, std::span<const float> row_logits) {
  if (logits_observer_) logits_observer_(r.id, row_logits);
  const bool finite = std::all_of(row_logits.begin(), row_logits.end(), [](float x) { return std::isfinite(x); });
  std::span<const float> sample_from = row_logits;
  bool can_sample = finite;
  if (finite && outputs_.has_grammar(r.id)) {
    can_sample = outputs_.constrain(r, row_logits, masked_logits_);
    sample_from = masked_logits_;
  }
  const TokenId token = can_sample ? outputs_.sampler(r.id).sample(sample_from) : kNoToken;
  if (token != kNoToken) outputs_.observe_logits(r.id, row_logits, token);
  return token;
}

std::vector<TokenId> Engine::sample(const SchedulerOutput& plan, std::span<const float> logits) {
  std::vector<TokenId> sampled;
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.needs_logits) continue;
    if (chunk.num_draft > 0) {  // verified row by row in process_outputs
      row += 1 + static_cast<size_t>(chunk.num_draft);
      continue;
    }
    sampled.push_back(sample_row(*chunk.request, logits.subspan(row++ * n_vocab, n_vocab)));
  }
  return sampled;
}

RequestOutput Engine::finish_unsampled(Request& r, RequestOutput news) {
  if (outputs_.grammar_stuck(r.id)) {
    // No token can extend the grammar's output (a vocabulary without some byte): nothing more can be generated.
    return finish_request(r.id, FinishReason::kLength, std::move(news));
  }
  const std::string message = fmt::format(
      "the model's logits for the next token (position {}) of request {} are not finite (NaN or inf); "
      "nothing was sampled",
      r.num_tokens(), r.id.value);
  return finish_request(r.id, FinishReason::kAborted, std::move(news),
                        RuntimeError{RuntimeErrorCode::kNonFiniteLogits, message});
}

void Engine::process_outputs(const SchedulerOutput& plan, std::span<const TokenId> sampled,
                             std::span<const float> logits, std::vector<RequestOutput>& outputs) {
  const auto now = RequestTimes::Clock::now();
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  size_t next = 0;
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.needs_logits) continue;
    Request& r = *chunk.request;
    if (!r.times.first_token) r.times.first_token = now;
    if (chunk.num_draft > 0) {
      const size_t n_rows = 1 + static_cast<size_t>(chunk.num_draft);
      verify_draft(chunk, logits.subspan(row * n_vocab, n_rows * n_vocab), outputs);
      row += n_rows;
      continue;
    }
    ++row;
    const TokenId token = sampled[next++];
    if (token == kNoToken) {
      outputs.push_back(finish_unsampled(r, {}));
      continue;
    }
    RequestOutput news;
    news.num_cached_tokens = r.num_cached_tokens;
    const FinishReason reason = outputs_.process_token(r, token, news);
    if (reason != FinishReason::kNone) {
      outputs.push_back(finish_request(r.id, reason, std::move(news)));
    } else if (!news.new_tokens.empty() || !news.new_text.empty()) {
      outputs.push_back(std::move(news));
    }
  }
}

void Engine::verify_draft(const ScheduledChunk& chunk, std::span<const float> chunk_logits,
                          std::vector<RequestOutput>& outputs) {
  Request& r = *chunk.request;
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  const std::vector<TokenId>& draft = r.spec.draft;
  RequestOutput news;
  news.num_cached_tokens = r.num_cached_tokens;
  FinishReason reason = FinishReason::kNone;
  bool unsampled = false;
  int32_t accepted = 0;
  for (int32_t i = 0; i <= chunk.num_draft; ++i) {
    // Row i's logits are those a plain decode step would compute after the tokens emitted so far (the pending token
    // and draft[0, i), all accepted): batch-invariant kernels make them bitwise the same.
    const TokenId token = sample_row(r, chunk_logits.subspan(static_cast<size_t>(i) * n_vocab, n_vocab));
    if (token == kNoToken) {
      unsampled = true;
      break;
    }
    scheduler_->append_verified(r, token);
    reason = outputs_.process_token(r, token, news);
    const bool matches = i < chunk.num_draft && token == draft[static_cast<size_t>(i)];
    accepted += matches ? 1 : 0;
    if (reason != FinishReason::kNone || !matches) break;
  }
  const auto emitted = static_cast<uint64_t>(news.new_tokens.size());
  counters_.num_decode_tokens += emitted > 0 ? emitted - 1 : 0;  // run_batch counted the step's first token
  counters_.num_drafted_tokens += static_cast<uint64_t>(chunk.num_draft);
  counters_.num_accepted_tokens += static_cast<uint64_t>(accepted);
  scheduler_->end_verification(chunk, accepted);
  if (unsampled) {
    outputs.push_back(finish_unsampled(r, std::move(news)));
  } else if (reason != FinishReason::kNone) {
    outputs.push_back(finish_request(r.id, reason, std::move(news)));
  } else if (!news.new_tokens.empty() || !news.new_text.empty()) {
    outputs.push_back(std::move(news));
  }
}

RequestOutput Engine::finish_request(RequestId id, FinishReason reason, RequestOutput news,
                                     std::optional<RuntimeError> runtime_error) {
  std::unique_ptr<Request> request = scheduler_->finish(id, reason);
  HEARTH_CHECK(request != nullptr, "finishing request {}, which the scheduler does not hold", id.value);
  if (states_) states_->forget(id);
  int32_t pinned_tokens = 0;
  std::string pin_error;
  if (pin_on_finish_.erase(id) > 0 && reason != FinishReason::kAborted) {
    const std::span<const TokenId> prompt(request->tokens.data(), request->num_prompt_tokens);
    auto pinned = kv_->pin_prefix(request->cache_namespace, prompt);
    if (pinned) {
      pinned_tokens = pinned->num_tokens;
      tiers_->mark_pinned(request->cache_namespace, prompt, pinned_tokens);
      if (states_) states_->pin(pinned->key, request->cache_namespace, prompt, pinned_tokens);
    } else {
      pin_error = pinned.error().message;
    }
  }
  RequestOutput out = outputs_.finish(*request, std::move(news));
  out.usage.pinned_tokens = pinned_tokens;
  out.usage.pin_error = std::move(pin_error);
  out.runtime_error = std::move(runtime_error);
  counters_.num_finished++;
  return out;
}

void Engine::check_invariants() const {
  kv_->check_invariants();
  if (!scheduler_->has_unfinished()) {
    HEARTH_CHECK(kv_->pool().num_blocks_in_use() == kv_->num_blocks_pinned(),
                 "idle engine has {} blocks in use but only {} pinned", kv_->pool().num_blocks_in_use(),
                 kv_->num_blocks_pinned());
    int32_t pinned_slabs = 0;
    for (int32_t i = 0; i < kv_->pool().num_blocks_total(); ++i) {
      pinned_slabs += kv_->pool().window_slab_ref_cnt(BlockId{i}) > 0 ? 1 : 0;
    }
    HEARTH_CHECK(pinned_slabs <= kv_->num_blocks_pinned(), "idle engine holds {} window slabs beyond its pins",
                 pinned_slabs);
  }
}

}  // namespace hearth

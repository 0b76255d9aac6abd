#include "engine/engine.h"

#include <algorithm>

#include "model/fingerprint.h"
#include "util/log.h"

namespace hearth {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string: text that must be held
// back because the next token may complete a stop string.
size_t stop_prefix_overlap(std::string_view text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > keep; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

struct Engine::Stream {
  Stream(const Tokenizer& tokenizer, const RequestSpec& spec)
      : decoder(tokenizer),
        sampler(spec.sampling),
        stop(spec.stop),
        pin_prefix(spec.pin_prefix),
        cache_salt(spec.cache_salt),
        arrival(Clock::now()) {}

  IncrementalDecoder decoder;
  Sampler sampler;
  std::vector<std::string> stop;
  std::string held;  // decoded text not yet emitted: it may be the start of a stop string
  bool pin_prefix;
  std::string cache_salt;
  Clock::time_point arrival;
  Clock::time_point first_scheduled;
  Clock::time_point first_token;
  bool scheduled = false;
  bool has_first_token = false;
};

Result<std::unique_ptr<Engine>> Engine::create(Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                               ThreadPool& pool) {
  const ModelConfig& c = model.config();
  if (config.max_batch_tokens < 1) return make_error("max batch tokens must be >= 1");
  auto plan = plan_kv_pool({c.n_layers, c.n_kv_heads, c.head_dim}, config.kv_format, config.block_size,
                           config.kv_memory_bytes);
  if (!plan) return plan.error();
  auto storage = KvStorage::create({c.n_layers, c.n_kv_heads, c.head_dim}, config.kv_format, config.block_size,
                                   static_cast<int32_t>(plan->num_blocks));
  if (!storage) return storage.error();
  HEARTH_CHECK(static_cast<int64_t>((*storage)->bytes_total()) == plan->pool_bytes,
               "KV storage holds {} bytes but the plan says {}", (*storage)->bytes_total(), plan->pool_bytes);
  return std::unique_ptr<Engine>(new Engine(model, tokenizer, config, pool, *plan, std::move(*storage)));
}

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineConfig& config, ThreadPool& pool,
               const KvPlan& plan, std::unique_ptr<KvStorage> storage)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      pool_(pool),
      fingerprint_(model_fingerprint(model.file())),
      plan_(plan),
      storage_(std::move(storage)) {
  const ModelConfig& c = model.config();
  for (int32_t t = 0; t < tokenizer.vocab_size(); ++t) {
    if (tokenizer.is_eog(TokenId{t})) eog_ids_.push_back(TokenId{t});
  }
  const auto num_blocks = static_cast<int32_t>(plan.num_blocks);
  kv_ = std::make_unique<KvCacheManager>(KvCacheConfig{
      num_blocks, config.block_size, static_cast<int32_t>(num_blocks * config.max_pinned_fraction)});
  spdlog::info("{} ({} blocks of {}; the model's full context is {} tokens)", describe_kv_plan(plan), num_blocks,
               config.block_size, c.n_ctx_train);
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config.max_batch_tokens, config.max_running, config.max_waiting, c.n_ctx_train}, *kv_);
}

Engine::~Engine() = default;

BlockHash Engine::cache_namespace(const std::string& cache_salt) const {
  return CacheNamespace{fingerprint_, config_.kv_format.name(), config_.block_size, config_.adapter_id, cache_salt}.digest();
}

std::vector<BlockHash> Engine::other_namespaces(const BlockHash& ns) const {
  std::vector<BlockHash> out;
  const BlockHash unsalted = cache_namespace("");
  if (ns != unsalted) out.push_back(unsalted);
  for (const BlockHash& other : recent_namespaces_) {
    if (other != ns && other != unsalted) out.push_back(other);
  }
  return out;
}

void Engine::remember_namespace(const BlockHash& ns) {
  std::erase(recent_namespaces_, ns);
  recent_namespaces_.push_back(ns);
  if (recent_namespaces_.size() > kRecentNamespaces) recent_namespaces_.pop_front();
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
  report.reusable_tokens = std::min(e.reuse_stopped_at, std::max(0, report.prompt_tokens - 1));
  report.explanation = describe_reuse(tokenizer_, e, prompt, config_.block_size);
  return report;
}

Result<PinInfo> Engine::pin_prefix(std::span<const TokenId> prompt, const std::string& cache_salt) {
  return kv_->pin_prefix(cache_namespace(cache_salt), prompt);
}

Result<RequestId> Engine::add_request(RequestSpec spec) {
  HEARTH_TRY(spec.sampling.validate());
  for (TokenId t : spec.prompt) {
    if (!tokenizer_.is_valid(t)) return make_error("token id {} is outside the vocabulary of {}", t.value,
                                                   tokenizer_.vocab_size());
  }
  for (const std::string& s : spec.stop) {
    if (s.empty()) return make_error("stop strings must not be empty");
  }
  auto request = std::make_unique<Request>();
  request->id = RequestId{next_request_id_++};
  request->tokens = spec.prompt;
  request->num_prompt_tokens = static_cast<int32_t>(spec.prompt.size());
  request->sampling = spec.sampling;
  request->max_tokens = spec.max_tokens;
  if (!spec.ignore_eos) {
    request->stop_token_ids = eog_ids_;
  }
  request->use_cache = spec.use_cache;
  request->cache_namespace = cache_namespace(spec.cache_salt);
  request->other_namespaces = other_namespaces(request->cache_namespace);
  remember_namespace(request->cache_namespace);
  const RequestId id = request->id;
  auto stream = std::make_unique<Stream>(tokenizer_, spec);
  HEARTH_TRY(scheduler_->add_request(std::move(request)));
  streams_.emplace(id, std::move(stream));
  return id;
}

void Engine::abort(RequestId id) {
  auto request = scheduler_->finish(id, FinishReason::kAborted);
  if (request) pending_outputs_.push_back(finish_output(std::move(request)));
}

void Engine::apply_block_copies() {
  for (const BlockCopy& copy : kv_->pending_copies()) storage_->copy_slots(copy.dst, copy.src, copy.n_slots);
  kv_->complete_copies();
}

std::span<const float> Engine::run_batch(const SchedulerOutput& out) {
  batch_tokens_.clear();
  batch_seqs_.clear();
  for (const ScheduledChunk& chunk : out.chunks) {
    const Request& r = *chunk.request;
    BatchSequence seq;
    seq.first_row = static_cast<int32_t>(batch_tokens_.size());
    seq.n_tokens = chunk.num_tokens;
    seq.pos_begin = chunk.pos_begin;
    seq.block_table = kv_->block_table(r.id);
    seq.want_logits = chunk.needs_logits;
    batch_tokens_.insert(batch_tokens_.end(), r.tokens.begin() + chunk.pos_begin,
                         r.tokens.begin() + chunk.pos_begin + chunk.num_tokens);
    batch_seqs_.push_back(seq);
    if (chunk.needs_logits) {
      counters_.num_decode_tokens += r.num_computed_tokens >= r.num_prompt_tokens ? 1 : 0;
    }
    const int32_t prompt_end = std::min(chunk.pos_begin + chunk.num_tokens, r.num_prompt_tokens);
    counters_.num_prefill_tokens += std::max(0, prompt_end - chunk.pos_begin);
  }
  return model_.forward({batch_tokens_, batch_seqs_}, *storage_, pool_);
}

std::vector<TokenId> Engine::sample(const SchedulerOutput& out, std::span<const float> logits) {
  std::vector<TokenId> sampled;
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  size_t row = 0;
  for (const ScheduledChunk& chunk : out.chunks) {
    if (!chunk.needs_logits) continue;
    const auto row_logits = logits.subspan(row++ * n_vocab, n_vocab);
    if (logits_observer_) logits_observer_(chunk.request->id, row_logits);
    sampled.push_back(streams_.at(chunk.request->id)->sampler.sample(row_logits));
  }
  return sampled;
}

void Engine::emit_token(Stream& stream, TokenId token, RequestOutput& output) {
  output.new_tokens.push_back(token);
  stream.held += stream.decoder.push(token);
  if (stream.stop.empty()) {
    output.new_text += std::exchange(stream.held, {});
    return;
  }
  size_t first_match = std::string::npos;
  for (const std::string& s : stream.stop) first_match = std::min(first_match, stream.held.find(s));
  if (first_match != std::string::npos) {
    output.new_text += stream.held.substr(0, first_match);
    stream.held.clear();
    output.finished = true;
    output.finish_reason = FinishReason::kStop;
    return;
  }
  const size_t keep = stop_prefix_overlap(stream.held, stream.stop);
  output.new_text += stream.held.substr(0, stream.held.size() - keep);
  stream.held.erase(0, stream.held.size() - keep);
}

RequestOutput Engine::finish_output(std::unique_ptr<Request> request) {
  RequestOutput out;
  out.id = request->id;
  out.finished = true;
  out.finish_reason = request->finish_reason;
  auto it = streams_.find(request->id);
  HEARTH_CHECK(it != streams_.end(), "no stream for request {}", request->id.value);
  Stream& stream = *it->second;
  out.new_text = std::exchange(stream.held, {}) + stream.decoder.flush();
  const auto now = Clock::now();
  RequestUsage& u = out.usage;
  u.prompt_tokens = request->num_prompt_tokens;
  u.completion_tokens = request->num_output_tokens();
  u.cached_tokens = std::max(0, request->num_cached_tokens);
  u.copied_tokens = request->num_copied_tokens;
  u.preemptions = request->num_preemptions;
  u.ttft_ms = stream.has_first_token ? ms_between(stream.arrival, stream.first_token) : 0;
  u.prefill_ms = stream.has_first_token && stream.scheduled ? ms_between(stream.first_scheduled, stream.first_token) : 0;
  u.total_ms = ms_between(stream.arrival, now);
  if (request->explanation) {
    const std::span<const TokenId> prompt(request->tokens.data(), request->num_prompt_tokens);
    u.reuse = describe_reuse(tokenizer_, *request->explanation, prompt, config_.block_size);
  }
  if (stream.pin_prefix && request->finish_reason != FinishReason::kAborted) {
    const std::span<const TokenId> prompt(request->tokens.data(), request->num_prompt_tokens);
    auto pinned = kv_->pin_prefix(request->cache_namespace, prompt);
    if (pinned) {
      u.pinned_tokens = pinned->num_tokens;
    } else {
      u.pin_error = pinned.error().message;
    }
  }
  streams_.erase(it);
  counters_.num_finished++;
  return out;
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs = std::exchange(pending_outputs_, {});
  const SchedulerOutput plan = scheduler_->schedule();
  if (plan.chunks.empty()) return outputs;
  counters_.num_steps++;
  const auto now = Clock::now();
  for (const ScheduledChunk& chunk : plan.chunks) {
    Stream& s = *streams_.at(chunk.request->id);
    if (!s.scheduled) s.first_scheduled = now;
    s.scheduled = true;
  }
  apply_block_copies();
  const std::vector<TokenId> sampled = sample(plan, run_batch(plan));
  // Remember who sampled what before update() may finish (and hand back) some requests.
  std::vector<RequestId> sampled_ids;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (chunk.needs_logits) sampled_ids.push_back(chunk.request->id);
  }
  std::vector<std::unique_ptr<Request>> finished = scheduler_->update(plan, sampled);
  const auto sampled_at = Clock::now();
  for (size_t i = 0; i < sampled_ids.size(); ++i) {
    const RequestId id = sampled_ids[i];
    Stream& stream = *streams_.at(id);
    if (!stream.has_first_token) {
      stream.has_first_token = true;
      stream.first_token = sampled_at;
    }
    auto done = std::find_if(finished.begin(), finished.end(), [&](const auto& f) { return f->id == id; });
    // The scheduler finishes with kStop only for a stop token, which is never emitted.
    const bool stop_token = done != finished.end() && (*done)->finish_reason == FinishReason::kStop;
    RequestOutput out;
    out.id = id;
    if (!stop_token) emit_token(stream, sampled[i], out);
    if (out.finished) {  // a stop string matched
      std::unique_ptr<Request> request;
      if (done != finished.end()) {
        request = std::move(*done);
        finished.erase(done);
        request->finish_reason = FinishReason::kStop;
      } else {
        request = scheduler_->finish(id, FinishReason::kStop);
      }
      RequestOutput final_output = finish_output(std::move(request));
      final_output.new_tokens = std::move(out.new_tokens);
      final_output.new_text = std::move(out.new_text) + final_output.new_text;
      outputs.push_back(std::move(final_output));
      continue;
    }
    if (!out.new_tokens.empty() || !out.new_text.empty()) outputs.push_back(std::move(out));
  }
  for (auto& request : finished) outputs.push_back(finish_output(std::move(request)));
  return outputs;
}

void Engine::check_invariants() const {
  kv_->check_invariants();
  if (!scheduler_->has_unfinished()) {
    HEARTH_CHECK(kv_->pool().num_blocks_in_use() == kv_->num_blocks_pinned(),
                 "idle engine has {} blocks in use but only {} pinned", kv_->pool().num_blocks_in_use(),
                 kv_->num_blocks_pinned());
  }
}

}  // namespace hearth

#pragma once
// What crosses the engine's boundary, and nothing else: the request a caller submits (RequestSpec), what comes
// back (RequestOutput, RequestUsage, ReuseExplanation, CacheReport), the engine's fixed facts (EngineInfo) and its
// live counters (EngineStats). The server includes this header (through engine_loop.h) and never sees a model,
// a tensor or a kernel.
//
// Who owns which record of one request:
//   server  CompletionRequest + Generation   the HTTP body, response ids, SSE state, the answer memory's text
//   engine  RequestSpec in; Sequence         sampler, detokenizer, stop strings (output_processor.h)
//   sched   Request                          tokens, limits, progress, timings, reuse and preemption counts
// The final RequestOutput carries the Request's facts out (usage, the token ids), so nothing is collected twice.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv/disk_tier.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_plan.h"
#include "kv/prefix_explain.h"
#include "kv/redis_tier.h"
#include "sched/admission.h"
#include "sched/request.h"
#include "sched/sampling_params.h"
#include "sched/submit_error.h"
#include "util/ids.h"

namespace hearth {

class Grammar;  // grammar/grammar.h

// Most alternatives a request may ask logprobs for (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxTopLogprobs = 20;
// Longest stop string, in bytes. Each token's stop check (a search of the held text, and its overlap with each
// stop's prefixes) costs up to the square of this on the engine thread, which every request shares.
inline constexpr size_t kMaxStopBytes = 256;

struct TokenLogprob {
  TokenId token;
  float logprob = 0;
};

// One generated token's log-probability and its most likely alternatives under the model's own distribution:
// log-softmax of the raw logits, before temperature, top-k and top-p (vLLM's default), so the numbers describe the
// model, not the sampling settings. Computed only for a request that asks (RequestSpec::top_logprobs).
struct TokenLogprobs {
  TokenId token;
  float logprob = 0;              // <= 0
  std::vector<TokenLogprob> top;  // the top_logprobs most likely tokens, most likely first (lowest id on ties)
};

// The most checkpoint hints one request may carry (RequestSpec::checkpoint_hints).
inline constexpr size_t kMaxCheckpointHints = 4;
inline constexpr size_t kMaxPredictionTokens = 32768;  // RequestSpec::prediction

struct RequestSpec {
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  // Tokens to generate. Unset: default_max_tokens when set, else all the context leaves after the prompt; either
  // way clamped to what the context leaves (OpenAI: 16 for completions, the rest of the context for chat). A limit,
  // not a reservation: KV blocks are taken as tokens arrive, and the pool may stop the request first
  // (RequestUsage::stopped_by_kv_pool). Set: clamped to what the context leaves too (Anthropic clients send a large
  // max_tokens; RequestUsage::max_tokens_clamped_to says so), unless strict_max_tokens, where prompt + max_tokens
  // beyond the context is kContextExceeded. A prompt that leaves no room is kPromptTooLong either way.
  std::optional<int32_t> max_tokens;
  std::optional<int32_t> default_max_tokens;
  bool strict_max_tokens = false;
  std::vector<std::string> stop;  // stop strings: matched across token boundaries, never emitted
  bool ignore_eos = false;
  bool use_cache = true;
  std::string cache_salt;
  bool pin_prefix = false;  // when done, pin the prompt's cached full blocks (see Engine::pin_prefix)
  // Retention of the prompt's leading blocks (at most kMaxRetentionSpans spans, priorities <= 100, TTLs within
  // kMaxRetentionTtlMs; check_request refuses others). Empty: the default priority, no expiry.
  std::vector<RetentionSpan> retention;
  // Hybrid models: prompt positions where other prompts are likely to branch (the end of a shared system prompt),
  // at most kMaxCheckpointHints, each in [1, prompt size]. The engine keeps a state checkpoint at the block boundary
  // at or before each (and at each retention span's end), so a later request branching there resumes at it.
  // Attention-only models ignore them: their hits are token-granular anyway.
  std::vector<int32_t> checkpoint_hints;
  // Set: every generated token comes with its TokenLogprobs and this many alternatives, in [0, kMaxTopLogprobs].
  // Unset: nothing is computed.
  std::optional<int32_t> top_logprobs;
  // Set: constrained decoding. Every sampled token keeps the output a valid prefix of the grammar's language (the
  // other tokens' logits are masked to -inf before sampling; logprobs still describe the raw logits); the request
  // finishes with stop once the output is whole and nothing can follow, and with length at max_tokens (the output
  // is then what was generated). Shared, immutable: the n choices of one request use one grammar.
  std::shared_ptr<const Grammar> grammar;
  // The output text spells control tokens (<|channel|>, <|end|>, ...) instead of leaving them out, for answers
  // whose markup the caller parses (the server's harmony answers). Stop tokens are never emitted either way.
  bool render_special_tokens = false;
  // Speculative decoding (sched/speculation.h); unset: the engine's default (EngineConfig::speculative). The output
  // is the one plain decoding gives, token for token (greedy, seeded sampling, grammar, logprobs); hybrid models
  // never speculate (their recurrent state cannot roll back a rejected draft).
  std::optional<SpeculativeParams> speculative;
  // A predicted output (OpenAI's "prediction"; at most kMaxPredictionTokens, ids in the vocabulary): drafted from
  // where the output follows it (sched/speculation.h), whatever `speculative` says, with the same guarantee: the
  // output is plain decoding's. Hybrid models refuse it at submit (no speculation there).
  std::vector<TokenId> prediction;
};

// Where prefix reuse stopped and why, with the text around that point (engine/explain.h fills it).
struct ReuseExplanation {
  std::optional<ReuseStop> reason;  // unset when the request was never admitted
  int32_t stopped_at = 0;           // token index of the first token not reused
  int32_t stopped_block = 0;        // its block
  int32_t block_size = 0;
  // Text around stopped_at (kDiverged, kEvicted, kDifferentSalt, kEndOfCachedPrefix): the shared text before it,
  // the prompt's text from it, and (kDiverged) the nearest cached prefix's text from it.
  std::string context_text;
  std::string prompt_text;
  std::string cached_text;
  int32_t evicted_block = -1;     // kEvicted
  int32_t other_salt_tokens = 0;  // kDifferentSalt: tokens reusable under another cache_salt
  int32_t kv_matched_tokens = 0;  // kNoCheckpoint: tokens whose KV is cached beyond the resume point
};

// What a request spent and saved; reported with every finished request.
struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens reused from the prefix cache (shared + copied)
  int32_t copied_tokens = 0;  // of which were copied from a partially matching block
  int32_t preemptions = 0;
  // The KV pool, not max_tokens or the context, ended the request (finish_reason length): it ran alone and the pool
  // less its pins had no block for its next token. KV grows on demand, so max_tokens reserves nothing and a request
  // admitted beside others may meet the pool's end. False for every other finish.
  bool stopped_by_kv_pool = false;
  // The max_tokens the request ran with when the context's room cut the one asked for (RequestSpec::max_tokens);
  // 0: not clamped. A request that reaches it finishes with length.
  int32_t max_tokens_clamped_to = 0;
  double ttft_ms = 0;     // arrival to first token
  double prefill_ms = 0;  // first admission to first token
  double total_ms = 0;
  int32_t pinned_tokens = 0;  // with pin_prefix: tokens of the prompt now pinned
  std::string pin_error;      // with pin_prefix: why pinning failed (e.g. the pin cap)
  ReuseExplanation reuse;     // where prefix reuse stopped and why
  TierReuse tier;             // blocks a lower tier held, the load-or-recompute decision, tokens loaded
  int32_t drafted_tokens = 0;  // speculative decoding: tokens drafted, and of them accepted (equal to the picks)
  int32_t accepted_tokens = 0;
  int32_t verify_steps = 0;  // decode steps that verified a draft
  // With a prediction (RequestSpec::prediction): its tokens, and the drafted ones of them accepted or rejected.
  int32_t prediction_tokens = 0;
  int32_t accepted_prediction_tokens = 0;
  int32_t rejected_prediction_tokens = 0;
};

// What the cache holds of a prompt right now (Engine::explain_prompt); nothing is computed or changed.
struct CacheReport {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // leading prompt tokens whose K/V is cached now (whole blocks + a partial match)
  int32_t reusable_tokens = 0;    // of those, what a request would reuse (its last prompt token is always computed)
  int32_t cached_tokens_ram = 0;  // per tier: the block pool
  int32_t cached_tokens_disk = 0;  // the disk tier's blocks right after what the pool caches (a request loads them
                                   // back when that is faster than computing them)
  ReuseExplanation explanation;   // over the whole prompt: end_of_prompt means all of it is cached
};

// Why the engine ended a request that was admitted, when neither its limits nor its client did. It comes on the
// final output as RequestOutput::runtime_error, with finish_reason kAborted: a front end that does not read it
// degrades to what an abort shows, never to a "stop" over garbage, and a client's own cancel is kAborted with no
// runtime_error, so the two are told apart by this field alone. A kind of its own (not a SubmitErrorCode, which is
// about refusals before running; not a FinishReason, which is the OpenAI finish_reason): the server maps it with a
// switch without default (HTTP status and error type), so a new kind fails to compile until it is mapped.
enum class RuntimeErrorCode {
  kNonFiniteLogits,  // the next token's logits held NaN or inf: nothing was sampled (server: 500, server_error)
  kShuttingDown,     // the engine loop stopped without draining (server: 503, "server shutting down")
};

struct RuntimeError {
  RuntimeErrorCode code = RuntimeErrorCode::kShuttingDown;
  std::string message;  // for the user, with the numbers
};

// One request's news from a step.
struct RequestOutput {
  RequestId id;
  std::vector<TokenId> new_tokens;
  std::string new_text;                 // complete UTF-8 only; text that may start a stop string is held back
  std::vector<TokenLogprobs> logprobs;  // with RequestSpec::top_logprobs: one per new_tokens entry, in order
  // On every output of an admitted request: prompt tokens reused from the prefix cache at its first admission (the
  // final usage's cached_tokens), so a stream can report the cache split before the end. -1: never admitted.
  int32_t num_cached_tokens = -1;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  // When finished:
  RequestUsage usage;
  std::vector<TokenId> tokens;                // the prompt, then every generated token (stop tokens excluded)
  std::string stop_sequence;                  // the stop string that ended it (finish_reason kStop), else empty
  std::optional<SubmitError> error;           // the request was refused when the engine queued it (it never ran)
  std::optional<RuntimeError> runtime_error;  // the engine ended it while admitted (finish_reason kAborted)
};

// What a model is, for model listings (Ollama's /api/tags details): from its file, filled by whoever opened it.
struct ModelListing {
  std::string architecture;     // general.architecture
  uint64_t num_params = 0;      // elements of every tensor
  std::string file_type;        // "Q4_K_M", "F16", ... ("" when the file does not say)
  int64_t modified_unix_s = 0;  // the file's modification time
  std::string digest;           // the model fingerprint (hex SHA-256), once computed (the engine sets it)
};

// The engine's fixed facts, published once; readable from any thread.
struct EngineInfo {
  std::string model_id;  // the name requests use (EngineConfig::model_id)
  ModelListing listing;  // EngineConfig::listing with its digest
  // OpenAI's system_fingerprint: "fp_" + the model fingerprint's first 12 hex digits + "_" + the build's git
  // commit (at configure time): a seed reproduces tokens only under the same one.
  std::string system_fingerprint;
  int32_t n_ctx = 0;       // the model's context length
  int32_t vocab_size = 0;  // the tokenizer's: prompt ids must be below it
  int32_t block_size = 0;
  int32_t max_waiting = 0;
  KvPlan kv_plan;             // the pool the engine runs with
  int64_t weights_bytes = 0;  // the model file's tensor data
  // Every KV dtype's cost per token at this model's shape (plus the pool's own format if K and V differ): the rows
  // of a memory plan (hearth plan, GET /v1/kv/plan).
  std::vector<KvTokenCost> kv_dtype_costs;
  // Hybrid models (recurrent layers): one sequence's recurrent state, and the state slots carved out of the budget
  // before the KV pool (engine/recurrent_states.h); 0 for attention-only models.
  int64_t state_bytes_per_sequence = 0;
  int32_t num_state_running_slots = 0;
  int32_t num_state_checkpoint_slots = 0;
  // Embeddings (Engine::embed): the pooling ("mean", "cls", "last") and the vector's width when the model serves
  // them; else why not, in words a client can act on (embedding_refusal non-empty, embedding_pooling empty).
  std::string embedding_pooling;
  int32_t embedding_dim = 0;
  std::string embedding_refusal;
  // Why the model generates no text (an encoder: bert, nomic-bert), in words a client can act on; empty when it does.
  std::string generation_refusal;
};

// One L2-normalised vector per input, in input order (Engine::embed).
using Embeddings = std::vector<std::vector<float>>;

// The tier link's own counters (the tier's are DiskTierStats).
struct TierLinkCounters {
  uint64_t num_load_decisions = 0;       // requests that found blocks in the tier and loaded them
  uint64_t num_recompute_decisions = 0;  // requests that found blocks in the tier but recomputed (cheaper)
  uint64_t num_load_timeouts = 0;        // loads given up at their deadline
  uint64_t num_loaded_tokens = 0;        // tokens put back into the pool
  uint64_t num_blocks_persisted = 0;     // blocks queued for the disk tier (write-through)
  uint64_t num_blocks_persisted_redis = 0;  // blocks queued for the Redis tier (those it is known to hold skipped)
  uint64_t num_loaded_tokens_redis = 0;     // of num_loaded_tokens, from the Redis tier
  double prefill_tokens_per_s = 0;       // the measured prefill speed (0: none yet)
  double tier_seconds_per_block = 0;     // the disk tier's measured load speed (0: none yet)
  double redis_seconds_per_block = 0;    // the Redis tier's
};

// The engine's counters and pool state at one instant (EngineLoop::stats).
struct EngineStats {
  int64_t num_blocks_total = 0;
  int64_t num_blocks_in_use = 0;  // referenced by running requests or pins
  int64_t num_blocks_pinned = 0;  // of which held by pins
  int64_t num_blocks_cached = 0;  // in the prefix index (in use or not)
  int64_t num_blocks_free = 0;    // unreferenced: empty or cached, reusable
  int64_t num_blocks_cached_free = 0;  // of the free ones, still cached (a later prompt may reuse them)
  // Unreferenced cached blocks by effective retention priority band (0 once expired): [0,25), [25,50), [50,75),
  // [75,100]. Pinned and running blocks are not evictable and not counted.
  std::array<int64_t, 4> num_blocks_evictable_by_band{};
  uint64_t num_evictions = 0;
  // Window slabs (sliding-window layers' K/V, kv/block_pool.h); all 0 without them.
  int64_t num_window_slabs_total = 0;
  int64_t num_window_slabs_in_use = 0;  // held by running requests, pins and copies
  int64_t num_window_slabs_idle = 0;    // unreferenced, still attached to a cached block
  uint64_t num_window_slab_evictions = 0;
  uint64_t num_preemptions = 0;
  // Hybrid models (engine/recurrent_states.h): checkpoints held now, written so far, and hits resumed from one.
  int32_t num_state_checkpoints = 0;
  uint64_t num_state_checkpoints_written = 0;
  uint64_t num_state_resumes = 0;
  uint64_t num_state_tier_loads = 0;  // checkpoints read back from the disk tier
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  uint64_t num_cache_queries = 0;
  uint64_t num_cache_query_tokens = 0;
  uint64_t num_cache_hit_tokens = 0;
  uint64_t num_cache_copied_tokens = 0;
  uint64_t num_steps = 0;
  uint64_t num_prefill_tokens = 0;  // prompt tokens computed (not reused)
  uint64_t num_decode_tokens = 0;
  uint64_t num_finished = 0;
  uint64_t num_drafted_tokens = 0;    // speculative decoding: tokens drafted and verified
  uint64_t num_accepted_tokens = 0;   // of them, accepted
  std::optional<DiskTierStats> disk;  // set when the engine has a disk tier
  std::optional<RedisTierStats> redis;  // set when the engine has a Redis tier
  TierLinkCounters tier_link;
};

// One namespace's cached prefixes as a tree (Engine::cached_prefixes; kv's CachedPrefixTree with text and times).
struct CachedPrefixEntry {
  int32_t parent = -1;  // index into CachedPrefixes::entries; -1 for a prefix's first run of blocks
  std::string text;     // the run's first tokens as text (control tokens rendered), cut at a UTF-8 boundary
  bool text_truncated = false;
  int32_t num_tokens = 0;    // tokens in the run
  int32_t depth_tokens = 0;  // tokens from the prompt's start to the run's end
  int32_t num_blocks = 0;
  int32_t num_blocks_pinned = 0;
  int32_t num_blocks_in_use = 0;
  uint32_t num_hits = 0;  // prefix hits on the run's first block since it was cached
  // Seconds since any of its blocks was last used (to the engine's 0.25 s resolution); unset when older than the
  // engine's record of its clock (see Engine::note_pool_clock).
  std::optional<double> idle_s;
  std::vector<std::string> tiers;  // where its KV lives: "ram" (the block pool) is the only tier so far
};

// One chain the disk tier holds (a cached prefix from its first block to a block nothing on disk continues).
struct DiskPrefixEntry {
  std::string text;  // its first tokens as text
  bool text_truncated = false;
  int32_t num_tokens = 0;  // tokens from the prompt's start to the chain's end
  int32_t num_blocks = 0;  // blocks of it on disk (a chain whose head was evicted from disk is not listed)
  bool in_ram = false;     // its last block is in the block pool too
  int32_t priority = 0;    // retention priority of its last block (100: pinned when written)
  uint32_t hits = 0;       // loads of its last block since the server started
  double idle_s = 0;       // seconds since its last block was last used (written or loaded)
};

struct CachedPrefixes {
  std::vector<DiskPrefixEntry> disk;       // the disk tier's chains of the namespace, most recently used first
  std::vector<CachedPrefixEntry> entries;  // pre-order: a run before its branches, most recently used first
  int32_t num_blocks = 0;                  // cached blocks walked in the namespace
  bool truncated = false;                  // a limit cut the listing
  double engine_ms = 0;                    // what the listing cost the engine's thread, in milliseconds
};

// Bounds of one listing (GET /v1/cache).
struct CachedPrefixQuery {
  std::string cache_salt;  // the namespace listed; empty: the unsalted one. Never any other.
  CachedPrefixLimits limits;
  size_t max_text_bytes = 160;  // per entry
};

// The one validation of a request, against the engine's facts and its admission limits now: token ids, sampling,
// stop strings, then max_tokens (RequestSpec's default resolved against the context) through check_admission.
// Returns the max_tokens the request runs with. Pure: EngineLoop::submit calls it on any thread with the limits
// the loop last published, Engine::add_request with the live ones.
[[nodiscard]] SubmitResult<int32_t> check_request(const RequestSpec& spec, const EngineInfo& info,
                                                  const AdmissionLimits& limits, int32_t num_waiting);

}  // namespace hearth

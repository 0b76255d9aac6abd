#pragma once
// The flags of `hearth serve`, shared by the one-model path (cmd_serve.cpp) and the several-models path
// (serve_models.cpp).

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/kv_tiers.h"
#include "gguf/gguf_file.h"
#include "kv/disk_tier.h"
#include "kv/redis_tier.h"
#include "server/http/tenant_keys.h"
#include "server/models/model_host.h"
#include "server/responses/response_store.h"
#include "util/result.h"

namespace hearth::app {

struct ServeFlags {
  std::string model_path;                // the one model (run_serve); several go to run_serve_models
  std::vector<std::string> model_paths;  // -m, repeatable
  std::string models_dir;                // --models DIR: every .gguf in it
  std::string memory;                    // --memory; empty: default_memory_budget()
  std::string keep_alive = "5m";         // --keep-alive
  bool keep_alive_given = false;         // --keep-alive was on the command line
  bool shared_pool = false;              // --shared-pool: one compute pool for every model
  std::string host = "127.0.0.1";
  int port = 8080;
  int ollama_port = -1;   // --ollama-port: the same routes on a second port (-1: none)
  std::string kv_memory;  // empty: min(25% of RAM, 4 GiB)
  std::string kv_dtype = "f16";
  std::string kv_dtype_k;  // empty: kv_dtype
  std::string kv_dtype_v;
  int32_t block_size = 16;
  bool kv_full_window = false;        // sliding-window models: keep every layer's full KV
  std::string pooling;  // embeddings: mean, cls or last in place of the file's pooling_type; empty: the file's
  int64_t kv_window_context = 1024;  // the context per user the window slabs are planned for
  int threads = 0;
  int32_t max_queue = 256;
  int32_t max_running = 64;
  int32_t max_batch_tokens = 512;
  std::string api_key;
  bool api_key_given = false;  // --api-key was on the command line (even as "")
  std::string api_keys_file;   // --api-keys FILE: a key per tenant (docs/tenants.md)
  std::shared_ptr<server::TenantKeys> tenants;  // --api-keys as loaded by run_serve; null without
  std::string max_body = "4MiB";
  std::vector<std::string> allow_origins;  // --allow-origin, repeatable; parsed in place by run_serve
  std::string model_id;
  std::vector<std::string> model_aliases;
  bool strict_model_names = false;
  bool strict_max_tokens = false;  // --strict-max-tokens: prompt + max_tokens beyond the context is a 400
  double shutdown_grace_s = 10.0;
  int answer_memory = 256;
  int responses_store = 1024;  // stored /v1/responses (0: off)
  std::string responses_store_bytes = "256MiB";
  int64_t responses_store_ttl_s = 3600;
  int max_connections = 1024;
  double header_timeout_s = 10.0;
  std::string kv_disk;       // empty: default_disk_tier_dir(); "off": no disk tier
  std::string kv_disk_size;  // empty: default_disk_tier_bytes()
  std::string kv_disk_key;   // a key file: the tier's entries are encrypted (kv/tier_seal.h); empty: plain
  std::string kv_disk_load = "measured";  // "measured": load when faster than recomputing; "always"
  std::string kv_redis;                   // redis://[user:password@]host[:port][/db]; empty: no Redis tier
  std::string kv_redis_load = "measured";  // as kv_disk_load, for blocks Redis holds
  int64_t kv_redis_ttl_s = 86400;          // TTL of entries without a retention expiry
  std::string kv_prefault = "on";         // "on": commit the KV pool's pages ahead of use (engine/kv_prefault.h)
  std::string speculative = "off";    // default speculative decoding: off, prompt-lookup, auto (sched/speculation.h)
  int32_t speculative_max_draft = 8;  // drafted tokens per step at most
  std::string draft_model;            // --draft-model: a GGUF of the same vocabulary drafting (app/serve_draft.h)
  std::string draft_kv_memory = "64MiB";  // its KV pool, taken from --kv-memory
  std::string warm_file;     // prompts to prefill and pin at start (--warm)
};

// The disk tier the flags ask for (null when --kv-disk off, or when the directory cannot be used: a warning, the
// server runs without it). Error for a bad --kv-disk-size, and for a --kv-disk-key that cannot be used (a server
// asked to encrypt never falls back to plain entries).
[[nodiscard]] Result<std::unique_ptr<DiskTier>> open_disk_tier(const ServeFlags& f);
// The Redis tier of --kv-redis (null without it), sealed with --kv-disk-key's key when one is given. Error for a
// bad URL (rediss:// included: no TLS in Debian's hiredis), a bad --kv-redis-ttl or an unusable key. A Redis that is
// down is no error: the tier connects when it can.
[[nodiscard]] Result<std::unique_ptr<RedisTier>> open_redis_tier(const ServeFlags& f);
// --kv-redis-load: whether blocks Redis holds load by measured cost or always.
TierLoadPolicy redis_load_policy(const ServeFlags& f);
// --responses-store, --responses-store-bytes, --responses-store-ttl; error for a bad byte size.
[[nodiscard]] Result<server::ResponseStore::Limits> responses_store_limits(const ServeFlags& f);
// --kv-disk-load: whether blocks the disk tier holds load by measured cost or always.
TierLoadPolicy tier_load_policy(const ServeFlags& f);
// min(25% of RAM, 4 GiB): each model's KV pool when --kv-memory is not given.
int64_t default_kv_memory();
// 75% of RAM: the budget of all models' weights and KV pools when --memory is not given.
int64_t default_memory_budget();
// Waits (on the calling thread, which has them blocked) for SIGINT or SIGTERM: the first starts on_stop (a graceful
// shutdown, on a thread of its own), a second calls cut_grace (the operator asks for a prompt exit: what is still in
// flight is aborted now). SIGHUP (in the set only with --api-keys) calls on_reload. Returns when `done` is set,
// after on_stop has returned.
void watch_stop_signals(const sigset_t& stop_signals, const std::atomic<bool>& done,
                        const std::function<void()>& on_stop, const std::function<void()>& cut_grace,
                        const std::function<void()>& on_reload = {});
// How the start line describes authentication: " (API keys per tenant)", " (API key set)" or "".
[[nodiscard]] inline const char* auth_note(const ServeFlags& f) {
  if (f.tenants) return " (API keys per tenant)";
  return f.api_key.empty() ? "" : " (API key set)";
}
// The SIGHUP action of --api-keys: re-read the file, swap the table, or keep the old one and log why. Empty without
// --api-keys.
[[nodiscard]] std::function<void()> tenant_keys_reloader(const ServeFlags& f);
// The --warm file: one warm-up per non-empty line, a JSON object (a POST /v1/cache/warm body) or plain prompt text.
[[nodiscard]] Result<std::vector<nlohmann::json>> read_warm_file(const std::string& path);
// What serving the model at `path` costs, from its GGUF header alone (serve_models.cpp): id (the file's stem),
// resident weights, the KV pool of `kv_bytes` at the flags' dtype and block size, the runtime (served_model_memory).
// What one served model holds beside its KV pool, estimated from its file: resident weights, and its runtime (the
// forward scratch at the flags' largest step, the tokenizer's tables, its engine and threads). The several-models
// budget and `hearth plan` count it (model/model_memory.h).
struct ServedMemory {
  int64_t weights_bytes = 0;
  int64_t runtime_bytes = 0;
};
[[nodiscard]] Result<ServedMemory> served_model_memory(const GgufFile& file, const ServeFlags& f);

// What the file at `path` is, for model listings (architecture, parameters, file type, modification time).
[[nodiscard]] ModelListing model_listing(const GgufFile& file, const std::string& path);

[[nodiscard]] Result<server::ModelSpec> describe_model(const ServeFlags& f, const std::string& path, int64_t kv_bytes);
// Serves several models under one memory budget (-m more than once, or --models). The stop signals are blocked.
int run_serve_models(ServeFlags f, int64_t kv_bytes, int64_t max_body, const sigset_t& stop_signals);

}  // namespace hearth::app

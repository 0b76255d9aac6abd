// hearth serve: loads a model, starts the engine loop and the OpenAI-compatible HTTP server; SIGINT/SIGTERM stop
// it gracefully (exit 0).

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "app/serve_draft.h"
#include "app/serve_flags.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "gguf/gguf_file.h"
#include "kv/disk_tier.h"
#include "kv/kv_plan.h"
#include "kv/tier_seal.h"
#include "model/model.h"
#include "model/pooling.h"
#include "server/http/cors.h"
#include "server/http/serve_access.h"
#include "server/server.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/process_memory.h"

namespace hearth::app {
namespace {

constexpr const char* kDefaultModel = "../shared/models/stories260K.gguf";

// A stop signal delivered to a thread that does not block it (see run_serve).
std::atomic<int> g_stop_signal{0};
extern "C" void record_stop_signal(int sig) {
  g_stop_signal.store(sig);
}

int64_t physical_ram() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? pages * page_size : (8ll << 30);
}

}  // namespace

int64_t default_kv_memory() {
  return std::min<int64_t>(physical_ram() / 4, int64_t{4} << 30);
}

int64_t default_memory_budget() {
  return physical_ram() / 4 * 3;
}

Result<server::ResponseStore::Limits> responses_store_limits(const ServeFlags& f) {
  auto bytes = parse_bytes(f.responses_store_bytes);
  if (!bytes) return make_error("--responses-store-bytes: {}", bytes.error().message);
  server::ResponseStore::Limits limits;
  limits.max_entries = static_cast<size_t>(f.responses_store);
  limits.max_bytes = static_cast<size_t>(*bytes);
  limits.ttl = std::chrono::seconds(f.responses_store_ttl_s);
  return limits;
}

Result<std::unique_ptr<DiskTier>> open_disk_tier(const ServeFlags& f) {
  // The disk tier (on unless --kv-disk off). A directory another process holds, or one that cannot be created,
  // leaves the server running without it, with a warning: it is a cache, never a reason not to serve.
  std::unique_ptr<DiskTier> disk_tier;
  if (f.kv_disk == "off" && !f.kv_disk_key.empty() && f.kv_redis.empty()) {
    return make_error(
        "--kv-disk-key encrypts the disk and Redis tiers' entries, and --kv-disk is off (and no "
        "--kv-redis)");
  }
  if (f.kv_disk != "off") {
    DiskTierConfig disk_config;
    disk_config.dir = f.kv_disk.empty() ? default_disk_tier_dir() : std::filesystem::path(f.kv_disk);
    if (f.kv_disk_size.empty()) {
      disk_config.capacity_bytes = default_disk_tier_bytes(disk_config.dir);
    } else {
      auto size = parse_bytes(f.kv_disk_size);
      if (!size) return make_error("--kv-disk-size: {}", size.error().message);
      disk_config.capacity_bytes = *size;
    }
    if (!f.kv_disk_key.empty()) {
      auto key = load_tier_key(f.kv_disk_key, disk_config.dir);
      if (!key) return make_error("--kv-disk-key: {}", key.error().message);
      disk_config.seal_key = std::move(*key);
    }
    auto opened = DiskTier::open(disk_config);
    if (opened) {
      disk_tier = std::move(*opened);
      const DiskTierStats st = disk_tier->stats();
      const uint64_t corrupt = disk_tier->num_removed_at_open() - st.num_key_mismatch_removed;
      spdlog::info("KV disk tier: {} ({} entries, {} of {} used{}{}{}; --kv-disk off disables it)",
                   disk_config.dir.string(), st.num_entries, format_bytes(st.bytes_used),
                   format_bytes(st.capacity_bytes), disk_config.seal_key ? ", encrypted with --kv-disk-key" : "",
                   corrupt > 0 ? fmt::format(", {} corrupt entries removed", corrupt) : std::string(),
                   st.num_key_mismatch_removed > 0
                       ? fmt::format(", {} entries of another key (or none) removed", st.num_key_mismatch_removed)
                       : std::string());
    } else {
      spdlog::warn("KV disk tier off: {}", opened.error().message);
    }
  } else {
    spdlog::info("KV disk tier: off");
  }

  return disk_tier;
}

Result<std::unique_ptr<RedisTier>> open_redis_tier(const ServeFlags& f) {
  if (f.kv_redis.empty()) return std::unique_ptr<RedisTier>();
  auto url = parse_redis_url(f.kv_redis);
  if (!url) return url.error();
  RedisTierConfig config;
  config.url = *url;
  config.default_ttl_ms = f.kv_redis_ttl_s * 1000;
  config.max_known_keys = 1 << 18;  // about 30 MiB of names at most
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  // hostname:port; with --port 0 (a port the OS picks) the process id tells servers on one host apart.
  config.server_id = f.port != 0 ? fmt::format("{}:{}", host, f.port) : fmt::format("{}:0/{}", host, ::getpid());
  if (!f.kv_disk_key.empty()) {
    // The same key as the disk tier's: Redis holds the same sealed entries, named by the same HMACs.
    const std::filesystem::path dir =
        f.kv_disk.empty() || f.kv_disk == "off" ? default_disk_tier_dir() : std::filesystem::path(f.kv_disk);
    auto key = load_tier_key(f.kv_disk_key, dir);
    if (!key) return make_error("--kv-disk-key: {}", key.error().message);
    config.seal_key = std::move(*key);
  }
  spdlog::info("KV Redis tier: {}:{} db {}{} (entries' TTL {} s; server id {})", url->host, url->port, url->db,
               config.seal_key ? ", encrypted with --kv-disk-key" : "", f.kv_redis_ttl_s, config.server_id);
  return RedisTier::open(config);
}

TierLoadPolicy redis_load_policy(const ServeFlags& f) {
  return f.kv_redis_load == "always" ? TierLoadPolicy::kAlways : TierLoadPolicy::kMeasured;
}

TierLoadPolicy tier_load_policy(const ServeFlags& f) {
  return f.kv_disk_load == "always" ? TierLoadPolicy::kAlways : TierLoadPolicy::kMeasured;
}

void watch_stop_signals(const sigset_t& stop_signals, const std::atomic<bool>& done,
                        const std::function<void()>& on_stop, const std::function<void()>& cut_grace,
                        const std::function<void()>& on_reload) {
  const timespec poll{0, 200 * 1000 * 1000};
  std::thread stopping;
  while (!done.load()) {
    int sig = sigtimedwait(&stop_signals, nullptr, &poll);
    if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP) sig = g_stop_signal.exchange(0);
    if (sig == SIGHUP) {
      if (on_reload) on_reload();
      continue;
    }
    if (sig != SIGINT && sig != SIGTERM) continue;
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (!stopping.joinable()) {
      spdlog::info("received {}", name);
      stopping = std::thread(on_stop);
    } else {
      spdlog::info("received {} again: aborting the requests in flight now", name);
      cut_grace();
    }
  }
  if (stopping.joinable()) stopping.join();
}

std::function<void()> tenant_keys_reloader(const ServeFlags& f) {
  if (!f.tenants) return {};
  return [tenants = f.tenants] {
    if (auto reloaded = tenants->reload(); !reloaded) {
      spdlog::error("SIGHUP: --api-keys not reloaded, the old keys stay: {}", reloaded.error().message);
      return;
    }
    const auto table = tenants->table();
    spdlog::info("SIGHUP: --api-keys reloaded from {}: {} keys of {} tenants", tenants->path(), table->num_keys(),
                 table->tenants().size());
  };
}

Result<std::vector<nlohmann::json>> read_warm_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read {}", path);
  std::vector<nlohmann::json> bodies;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.front() == '{') {
      auto body = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded() || !body.is_object()) return make_error("{} line {}: not a JSON object", path, n);
      bodies.push_back(std::move(body));
    } else {
      bodies.push_back({{"prompt", line}});
    }
  }
  return bodies;
}

namespace {

std::string default_model_id(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

// --api-keys: loads the file into f.tenants. Refused beside --api-key / HEARTH_API_KEY (which key would be whose
// tenant?) and beside --warm (a warm-up has no tenant, so no tenant could use what it pins).
Result<void> load_tenant_keys(ServeFlags& f) {
  if (f.api_keys_file.empty()) return {};
  if (!f.api_key.empty()) {
    return make_error(
        "--api-keys and --api-key (or HEARTH_API_KEY) together: give every key a tenant in the --api-keys file "
        "instead");
  }
  if (!f.warm_file.empty()) {
    return make_error(
        "--warm with --api-keys: a warm-up has no tenant, so no tenant could reuse it; warm with POST "
        "/v1/cache/warm and the tenant's key instead");
  }
  auto tenants = server::TenantKeys::open(f.api_keys_file);
  if (!tenants) return tenants.error();
  f.tenants = std::move(*tenants);
  const auto table = f.tenants->table();
  spdlog::info("API keys: {} keys of {} tenants from {} (SIGHUP re-reads it)", table->num_keys(),
               table->tenants().size(), f.api_keys_file);
  return {};
}

int run_serve(ServeFlags f) {
  // One allocator policy for the whole process, set before any thread starts (util/process_memory.h): 2 arenas, and
  // model unloads trim. MALLOC_ARENA_MAX, when the operator set it, wins.
  constexpr int kMallocArenas = 2;
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) bound_malloc_arenas(kMallocArenas);
  const bool several = f.model_paths.size() > 1 || !f.models_dir.empty();
  if (f.model_paths.size() == 1 && f.models_dir.empty()) f.model_path = f.model_paths[0];
  if (several && !f.model_id.empty()) {
    std::fprintf(stderr, "error: --model-id names the one model; with several, each is named by its file's stem\n");
    return 1;
  }
  if (!several && f.model_path.empty()) {
    if (!std::filesystem::exists(kDefaultModel)) {
      std::fprintf(stderr, "error: no model given (-m MODEL.gguf) and %s does not exist\n", kDefaultModel);
      return 1;
    }
    f.model_path = kDefaultModel;
  }
  auto kv_bytes = f.kv_memory.empty() ? Result<int64_t>(default_kv_memory()) : parse_bytes(f.kv_memory);
  if (!kv_bytes) return std::fprintf(stderr, "error: --kv-memory: %s\n", kv_bytes.error().message.c_str()), 1;
  auto max_body = parse_bytes(f.max_body);
  if (!max_body) return std::fprintf(stderr, "error: --max-body-bytes: %s\n", max_body.error().message.c_str()), 1;
  auto store_limits = responses_store_limits(f);
  if (!store_limits) return std::fprintf(stderr, "error: %s\n", store_limits.error().message.c_str()), 1;
  auto kv_format = parse_kv_format(f.kv_dtype, f.kv_dtype_k, f.kv_dtype_v);
  if (!kv_format) return std::fprintf(stderr, "error: %s\n", kv_format.error().message.c_str()), 1;
  if (kv_format->k == KvDtype::kQ4_0) {
    spdlog::warn(
        "q4_0 keys are lossy (hearth-bench-kv on stories260K: perplexity 4.72 -> 8.98, top-1 agreement "
        "61%); --kv-dtype-k q8_0 --kv-dtype-v q4_0 keeps top-1 at 96.5% with 2x the tokens of f16");
  }
  auto api_key = server::resolve_api_key(f.api_key_given ? std::optional<std::string>(f.api_key) : std::nullopt,
                                         std::getenv("HEARTH_API_KEY"));
  if (!api_key) return std::fprintf(stderr, "error: %s\n", api_key.error().message.c_str()), 1;
  f.api_key = *api_key;
  if (auto loaded = load_tenant_keys(f); !loaded) {
    return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
  }
  for (std::string& origin : f.allow_origins) {
    auto parsed = server::parse_allowed_origin(origin);
    if (!parsed) return std::fprintf(stderr, "error: %s\n", parsed.error().message.c_str()), 1;
    origin = *parsed;
  }
  if (const std::string warning = server::exposure_warning(f.host, !f.api_key.empty() || f.tenants); !warning.empty()) {
    spdlog::warn("{}", warning);
  }

  // SIGINT/SIGTERM are taken by a dedicated thread (sigwait), so every other thread, created after this, has
  // them blocked. Threads started before main (a linked library's pool, e.g. OpenBLAS's) do not have them
  // blocked: a handler catches the signal there and the same thread sees it. SIGPIPE from writes to closed
  // sockets is ignored (the write reports the error).
  struct sigaction on_stop = {};
  on_stop.sa_handler = record_stop_signal;
  sigemptyset(&on_stop.sa_mask);
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);
  if (f.tenants) sigaction(SIGHUP, &on_stop, nullptr);  // --api-keys: SIGHUP re-reads the file
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (f.tenants) sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (several && !f.draft_model.empty()) {
    std::fprintf(stderr, "error: --draft-model drafts for one served model; serve one model (-m once) to use it\n");
    return 1;
  }
  if (several) return run_serve_models(std::move(f), *kv_bytes, *max_body, stop_signals);
  int64_t draft_kv = 0;
  if (!f.draft_model.empty()) {
    auto bytes = draft_kv_bytes(f, *kv_bytes);
    if (!bytes) return std::fprintf(stderr, "error: %s\n", bytes.error().message.c_str()), 1;
    draft_kv = *bytes;
  }
  if (f.keep_alive_given)
    spdlog::warn("--keep-alive applies to several models (-m more than once, --models); the one model stays loaded");
  if (f.shared_pool) spdlog::warn("--shared-pool applies to several models; the one model has the one pool anyway");

  if (!f.memory.empty()) {
    // One model: the budget is checked once, at start (nothing else could need its room).
    auto budget = parse_bytes(f.memory);
    if (!budget) return std::fprintf(stderr, "error: --memory: %s\n", budget.error().message.c_str()), 1;
    auto spec = describe_model(f, f.model_path, *kv_bytes);
    if (!spec) return std::fprintf(stderr, "error: %s\n", spec.error().message.c_str()), 1;
    const auto process_bytes = static_cast<int64_t>(resident_bytes());
    if (!f.draft_model.empty()) {  // the draft's weights and scratch count too (its KV is part of the pool's)
      auto draft = describe_model(f, f.draft_model, 0);
      if (!draft) return std::fprintf(stderr, "error: --draft-model: %s\n", draft.error().message.c_str()), 1;
      spec->cost.weights_bytes += draft->cost.weights_bytes;
      spec->cost.runtime_bytes += draft->cost.runtime_bytes;
    }
    if (spec->cost.total() + process_bytes > *budget) {
      std::fprintf(stderr,
                   "error: the model needs %s (%s of weights + %s of KV pool + %s of scratch and tokenizer) beside the %s the "
                   "server itself holds, more than --memory %s\n",
                   format_bytes(spec->cost.total()).c_str(), format_bytes(spec->cost.weights_bytes).c_str(),
                   format_bytes(spec->cost.kv_bytes).c_str(), format_bytes(spec->cost.runtime_bytes).c_str(),
                   format_bytes(process_bytes).c_str(), format_bytes(*budget).c_str());
      return 1;
    }
  }

  auto file = GgufFile::open(f.model_path);
  if (!file) return std::fprintf(stderr, "error: %s\n", file.error().message.c_str()), 1;
  auto shared_file = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(shared_file);
  if (!model) return std::fprintf(stderr, "error: %s\n", model.error().message.c_str()), 1;
  auto tokenizer = Tokenizer::from_gguf(*shared_file);
  if (!tokenizer) return std::fprintf(stderr, "error: %s\n", tokenizer.error().message.c_str()), 1;
  std::string template_warning;
  auto chat = server::ChatFormatter::create(ChatTemplate::from_gguf(*shared_file, &template_warning), *tokenizer);
  if (!template_warning.empty()) spdlog::warn("chat template: {}", template_warning);
  spdlog::info("chat format: {}", chat->describe());

  auto opened_tier = open_disk_tier(f);
  if (!opened_tier) return std::fprintf(stderr, "error: %s\n", opened_tier.error().message.c_str()), 1;
  std::unique_ptr<DiskTier> disk_tier = std::move(*opened_tier);
  auto opened_redis = open_redis_tier(f);
  if (!opened_redis) return std::fprintf(stderr, "error: %s\n", opened_redis.error().message.c_str()), 1;
  std::unique_ptr<RedisTier> redis_tier = std::move(*opened_redis);

  ThreadPool pool(f.threads);
  std::unique_ptr<DraftModel> draft;
  if (!f.draft_model.empty()) {
    auto loaded = load_draft_model(f, *tokenizer, draft_kv, pool);
    if (!loaded) return std::fprintf(stderr, "error: %s\n", loaded.error().message.c_str()), 1;
    draft = std::move(*loaded);
  }
  EngineConfig engine_config;
  engine_config.disk_tier = disk_tier.get();
  engine_config.tier_load_policy = tier_load_policy(f);
  engine_config.redis_tier = redis_tier.get();
  engine_config.redis_load_policy = redis_load_policy(f);
  engine_config.block_size = f.block_size;
  engine_config.kv_memory_bytes = *kv_bytes - draft_kv;
  engine_config.kv_format = *kv_format;
  engine_config.max_batch_tokens = f.max_batch_tokens;
  engine_config.kv_window_slabs = !f.kv_full_window;
  engine_config.pooling = pooling_from_name(f.pooling);
  engine_config.kv_prefault = f.kv_prefault == "on";
  engine_config.speculative.mode = parse_speculative_mode(f.speculative).value_or(SpeculativeMode::kOff);
  engine_config.speculative.max_draft = f.speculative_max_draft;
  if (draft) {
    engine_config.drafter = draft->drafter.get();
    // A draft model is there to draft: requests that do not choose use it unless --speculative says otherwise.
    if (f.speculative == "off") engine_config.speculative.mode = SpeculativeMode::kDraftModel;
  }
  engine_config.kv_window_plan_context = f.kv_window_context;
  engine_config.max_running = f.max_running;
  engine_config.max_waiting = f.max_queue;
  engine_config.model_id = f.model_id.empty() ? default_model_id(f.model_path) : f.model_id;
  engine_config.listing = model_listing(*shared_file, f.model_path);
  auto engine = Engine::create(**model, *tokenizer, engine_config, pool);
  if (!engine) return std::fprintf(stderr, "error: %s\n", engine.error().message.c_str()), 1;
  EngineLoop loop(**engine);

  server::ServerConfig config;
  config.http.host = f.host;
  config.http.port = f.port;
  if (f.ollama_port >= 0) config.http.extra_ports = {f.ollama_port};
  config.http.max_body_bytes = static_cast<size_t>(*max_body);
  config.http.max_connections = f.max_connections;
  config.http.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.header_timeout_s * 1000));
  config.http.body_idle_timeout = config.http.header_timeout;
  config.http.cors.allowed_origins = f.allow_origins;
  config.api_key = f.api_key;
  config.tenants = f.tenants;
  config.shutdown_grace_s = f.shutdown_grace_s;
  config.answer_memory_entries = static_cast<size_t>(f.answer_memory);
  config.responses_store = *store_limits;
  config.model_aliases = f.model_aliases;
  config.strict_model_names = f.strict_model_names;
  config.strict_max_tokens = f.strict_max_tokens;
  server::HttpServer http(config, loop, *tokenizer, *chat);
  if (auto bound = http.bind(); !bound) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }

  // --warm: read before serving (a bad file stops the start with the line number), run beside it.
  std::vector<nlohmann::json> warm_bodies;
  if (!f.warm_file.empty()) {
    auto bodies = read_warm_file(f.warm_file);
    if (!bodies) return std::fprintf(stderr, "error: --warm: %s\n", bodies.error().message.c_str()), 1;
    warm_bodies = std::move(*bodies);
  }
  std::thread warm_thread([&] {
    for (size_t i = 0; i < warm_bodies.size(); ++i) {
      auto result = http.warm(warm_bodies[i]);
      if (!result) {
        spdlog::warn("--warm line {}: {}", i + 1, result.error().message);
      } else {
        const nlohmann::json& r = *result;
        spdlog::info("--warm line {}: {} tokens, {} were cached ({} from disk), {} pinned", i + 1,
                     r["prompt_tokens"].get<int>(), r["cached_tokens"].get<int>(), r["tiers"]["disk"].get<int>(),
                     r.value("pinned_tokens", 0));
      }
    }
  });

  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    watch_stop_signals(
        stop_signals, done, [&] { http.shutdown(); }, [&] { http.cut_grace(); }, tenant_keys_reloader(f));
  });

  // Tests and scripts read the port from this line (--port 0 picks a free one).
  std::printf("hearth: serving %s (model id '%s') on http://%s:%d%s\n", f.model_path.c_str(),
              engine_config.model_id.c_str(), f.host.c_str(), http.bound_port(), auth_note(f));
  for (int port : http.bound_extra_ports()) {
    std::printf("hearth: the same routes (Ollama's) on http://%s:%d\n", f.host.c_str(), port);
  }
  std::fflush(stdout);
  http.listen();
  done = true;
  signal_thread.join();
  warm_thread.join();
  loop.stop(/*drain=*/false);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  app.add_option("-m,--model", flags->model_paths,
                 std::string("GGUF model file (default ") + kDefaultModel +
                     "); repeat it to serve several models under one --memory budget");
  app.add_option("--models", flags->models_dir, "Serve every .gguf file in this folder (under one --memory budget)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--memory", flags->memory,
                 "Memory budget of every model's weights (file size) plus KV pool, e.g. 12GiB (default: 75% of RAM)");
  CLI::Option* keep_alive =
      app.add_option("--keep-alive", flags->keep_alive,
                     "Unload a model unused for this long, e.g. 30s, 5m, 2h; 0 keeps it until its room is needed")
          ->capture_default_str();
  app.add_flag("--shared-pool", flags->shared_pool,
               "Several models: one pool of -t compute threads whose calls take turns, instead of one pool per model");
  app.add_option("--host", flags->host, "Address to listen on")->capture_default_str();
  app.add_option("--port", flags->port, "Port to listen on; 0 picks a free one")->capture_default_str();
  app.add_option("--ollama-port", flags->ollama_port,
                 "Serve the same routes on this port too (11434: Ollama's, so apps set up for a local Ollama find "
                 "the server); 0 picks a free one")
      ->check(CLI::Range(0, 65535));
  app.add_option("--kv-memory", flags->kv_memory, "KV pool size (each model's, with several), e.g. 512MiB, 2GiB (default: min(RAM/4, 4GiB))");
  app.add_option("--kv-dtype", flags->kv_dtype, "KV cache dtype for K and V: f32, f16, bf16, q8_0, q4_0")
      ->capture_default_str();
  app.add_option("--kv-dtype-k", flags->kv_dtype_k, "KV dtype of keys (overrides --kv-dtype)");
  app.add_option("--kv-dtype-v", flags->kv_dtype_v, "KV dtype of values (overrides --kv-dtype)");
  app.add_option("--block-size", flags->block_size, "Tokens per KV block")->capture_default_str();
  app.add_option("--pooling", flags->pooling,
                 "Serve /v1/embeddings and /api/embed from this model with this pooling of its last hidden states, in "
                 "place of the GGUF's pooling_type (a chat model has none and serves no embeddings without it)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  app.add_flag("--kv-full-window", flags->kv_full_window,
               "Sliding-window models: keep every layer's full KV (the window only masks) instead of window slabs");
  app.add_option("--kv-prefault", flags->kv_prefault,
                 "Commit the KV pool's next pages ahead of use on an idle-priority thread (on), or as blocks are first "
                 "written (off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--speculative", flags->speculative,
                 "Speculative decoding for requests that do not choose (\"speculative\" in the body): off, "
                 "prompt-lookup (draft from n-grams of the prompt and the answer, verify in one pass; output identical "
                 "to plain decoding), auto (prompt lookup, paused while its measured acceptance makes it slower), or "
                 "draft-model (--draft-model drafts, paused as auto)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "prompt-lookup", "prompt_lookup", "auto", "draft-model", "draft_model"}));
  app.add_option("--draft-model", flags->draft_model,
                 "A small GGUF of the same vocabulary that drafts for speculative decoding (its own KV pool and prefix "
                 "cache; output identical to plain decoding); requests then use it unless --speculative or their "
                 "\"speculative\" says otherwise")
      ->check(CLI::ExistingFile);
  app.add_option("--draft-kv-memory", flags->draft_kv_memory,
                 "The draft model's KV pool, taken from --kv-memory (at most a quarter of it)")
      ->capture_default_str();
  app.add_option("--speculative-max-draft", flags->speculative_max_draft, "Tokens drafted per step at most")
      ->capture_default_str()
      ->check(CLI::Range(1, SpeculativeParams::kMaxDraftLimit));
  app.add_option("--kv-window-context", flags->kv_window_context,
                 "Sliding-window models: the context per user the KV pool's split between full-attention blocks and "
                 "window slabs is sized for")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("-t,--threads", flags->threads, "Compute threads; 0 uses every core")->capture_default_str();
  app.add_option("--max-queue", flags->max_queue, "Waiting requests before 429")->capture_default_str();
  app.add_option("--max-running", flags->max_running, "Requests computed at once")->capture_default_str();
  app.add_option("--max-batch-tokens", flags->max_batch_tokens, "Token budget per engine step")->capture_default_str();
  CLI::Option* api_key =
      app.add_option("--api-key", flags->api_key, "Require 'Authorization: Bearer KEY' (or env HEARTH_API_KEY)");
  app.add_option("--api-keys", flags->api_keys_file,
                 "Tenants by key: one 'KEY TENANT [max_concurrent=N]' per line; each tenant has its own cache "
                 "namespace, answers, responses and pins (docs/tenants.md); SIGHUP re-reads the file")
      ->type_name("FILE")
      ->check(CLI::ExistingFile);
  app.add_option("--allow-origin", flags->allow_origins,
                 "Let a browser app on this origin call the server (CORS), e.g. http://localhost:5173; '*' for any; "
                 "repeatable");
  app.add_option("--max-body-bytes", flags->max_body, "Largest request body, e.g. 4MiB")->capture_default_str();
  app.add_option("--model-id", flags->model_id, "Model name for /v1/models (default: the file name)");
  app.add_option("--model-alias", flags->model_aliases,
                 "Another name for the served model, listed by /v1/models and accepted even with "
                 "--strict-model-names (repeatable); with several models ID=NAME");
  app.add_flag("--strict-max-tokens", flags->strict_max_tokens,
               "Refuse (400) a request whose prompt + max_tokens exceeds the context, instead of clamping max_tokens "
               "to the room left");
  app.add_flag("--strict-model-names", flags->strict_model_names,
               "Answer 404 to a request naming a model other than the model id or an alias (default: any name is "
               "accepted and the response names the served model)");
  app.add_option("--shutdown-grace", flags->shutdown_grace_s, "Seconds in-flight requests may finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--max-connections", flags->max_connections,
                 "Open connections at once; one more is answered 503 (streams do not need a thread each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--header-timeout", flags->header_timeout_s,
                 "Seconds a client has to send a request head, and to make progress sending its body")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--kv-disk", flags->kv_disk,
                 "Disk tier directory for KV blocks, kept across restarts (default: $XDG_CACHE_HOME/hearth/kv-cache); "
                 "'off' disables it");
  app.add_option("--kv-disk-size", flags->kv_disk_size,
                 "Disk tier budget, e.g. 20GiB (default: a tenth of the free space, at most 64GiB)");
  app.add_option("--kv-disk-key", flags->kv_disk_key,
                 "Encrypt the disk tier's entries (AES-256-GCM) with the key in FILE: 32 random bytes or 64 hex "
                 "digits (openssl rand -hex 32), mode 0600, outside the tier directory. Entries of another key are "
                 "removed at start")
      ->type_name("FILE");
  app.add_option("--kv-disk-load", flags->kv_disk_load,
                 "Blocks the disk tier holds: load them when the measured costs say it is faster than recomputing "
                 "('measured'), or whenever found ('always')")
      ->capture_default_str()
      ->check(CLI::IsMember({"measured", "always"}));
  app.add_option("--kv-redis", flags->kv_redis,
                 "Share KV blocks with other Hearth servers through Redis, below the RAM and disk tiers: "
                 "redis://[user:password@]host[:port][/db] (docs/cluster.md). rediss:// is not supported (Debian's "
                 "hiredis has no TLS): use a TLS tunnel")
      ->type_name("URL");
  app.add_option("--kv-redis-load", flags->kv_redis_load,
                 "Blocks Redis holds: load them when the measured costs say it is faster than recomputing "
                 "('measured'), or whenever found ('always')")
      ->capture_default_str()
      ->check(CLI::IsMember({"measured", "always"}));
  app.add_option("--kv-redis-ttl", flags->kv_redis_ttl_s,
                 "TTL in seconds of the Redis tier's entries without a retention expiry of their own")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{365} * 86400));
  app.add_option("--warm", flags->warm_file,
                 "Prefill and pin these prefixes at start: one per line, a JSON body of POST /v1/cache/warm "
                 "(prompt or messages) or plain prompt text")
      ->check(CLI::ExistingFile);
  app.add_option("--answer-memory", flags->answer_memory,
                 "Recent answers whose generated token ids a later turn that quotes them reuses (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--responses-store", flags->responses_store,
                 "Stored /v1/responses kept for GET and previous_response_id, per model (0: off; store: true is "
                 "then refused)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--responses-store-bytes", flags->responses_store_bytes,
                 "Most bytes the stored responses hold (token ids, text, JSON), per model, e.g. 256MiB")
      ->capture_default_str();
  app.add_option("--responses-store-ttl", flags->responses_store_ttl_s,
                 "Seconds a stored response is kept (the oldest go first when the store is full)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{365} * 24 * 3600));
  return [flags, api_key, keep_alive] {
    flags->api_key_given = api_key->count() > 0;
    flags->keep_alive_given = keep_alive->count() > 0;
    return run_serve(*flags);
  };
}

}  // namespace hearth::app

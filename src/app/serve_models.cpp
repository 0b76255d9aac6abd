// hearth serve with several models: -m a.gguf -m b.gguf or --models DIR. Each model is described from its GGUF
// header at start (a bad file stops the start), loaded on first use under the --memory budget and unloaded least
// recently used or after --keep-alive (server/models/model_host.h); one ModelRouter (server/models/model_router.h) owns
// the socket. Each model has its own compute ThreadPool of -t threads (--shared-pool: one for all, calls taking turns);
// all share one disk tier (their keys never mix: the model fingerprint is part of every block key).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "app/serve_flags.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "gguf/describe.h"
#include "gguf/gguf_file.h"
#include "kv/kv_plan.h"
#include "model/config.h"
#include "model/model.h"
#include "model/model_memory.h"
#include "model/pooling.h"
#include "server/models/model_router.h"
#include "server/server.h"
#include "template/chat_template.h"
#include "tensor/kv_dtype.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/process_memory.h"
#include "util/thread_pool.h"

namespace hearth::app {
namespace {

// One loaded model. Members are declared in the order they are built; the destructor takes them down in reverse,
// after stopping the loop and making sure the disk tier holds what the engine wrote through.
class LoadedModel : public server::ServedModel {
 public:
  ~LoadedModel() override {
    if (http_) http_->shutdown();  // nothing is in flight (the host unloads idle models): stops the loop
    http_.reset();
    loop_.reset();
    engine_.reset();
    // Write-through queued every full cached block; flush() returns once they are all on disk, so a reload (or a
    // restart) finds them.
    if (disk_ != nullptr) disk_->flush();
  }
  server::HttpServer& http() override { return *http_; }
  std::string digest() override { return loop_->info().listing.digest; }

  static Result<std::unique_ptr<server::ServedModel>> load(const ServeFlags& f, const server::ModelSpec& spec,
                                                           int64_t kv_bytes, const server::ServerConfig& base,
                                                           DiskTier* disk, RedisTier* redis, ThreadPool* shared_pool,
                                                           std::function<void()> on_idle) {
    auto m = std::unique_ptr<LoadedModel>(new LoadedModel());
    m->disk_ = disk;
    auto file = GgufFile::open(spec.path);
    if (!file) return file.error();
    m->file_ = std::make_shared<const GgufFile>(std::move(*file));
    auto model = Model::load(m->file_);
    if (!model) return model.error();
    m->model_ = std::move(*model);
    auto tokenizer = Tokenizer::from_gguf(*m->file_);
    if (!tokenizer) return tokenizer.error();
    m->tokenizer_ = std::make_unique<Tokenizer>(std::move(*tokenizer));
    std::string template_warning;
    m->chat_ = server::ChatFormatter::create(ChatTemplate::from_gguf(*m->file_, &template_warning), *m->tokenizer_);
    if (!template_warning.empty()) spdlog::warn("{}: chat template: {}", spec.id, template_warning);
    auto kv_format = parse_kv_format(f.kv_dtype, f.kv_dtype_k, f.kv_dtype_v);
    if (!kv_format) return kv_format.error();
    EngineConfig ec;
    ec.disk_tier = disk;
    ec.tier_load_policy = tier_load_policy(f);
    ec.redis_tier = redis;
    ec.redis_load_policy = redis_load_policy(f);
    ec.block_size = f.block_size;
    ec.kv_memory_bytes = kv_bytes;
    ec.kv_format = *kv_format;
    ec.max_batch_tokens = f.max_batch_tokens;
    ec.kv_window_slabs = !f.kv_full_window;
    ec.pooling = pooling_from_name(f.pooling);
    ec.kv_prefault = f.kv_prefault == "on";
    ec.speculative.mode = parse_speculative_mode(f.speculative).value_or(SpeculativeMode::kOff);
    ec.speculative.max_draft = f.speculative_max_draft;
    ec.kv_window_plan_context = f.kv_window_context;
    ec.max_running = f.max_running;
    ec.max_waiting = f.max_queue;
    ec.model_id = spec.id;
    ec.listing = spec.listing;
    // Its own pool unless --shared-pool: the OS shares the cores between the models' threads (measured better for
    // one model's decode beside another's prefill than calls taking turns in one pool; README "Several models").
    ThreadPool* pool = shared_pool;
    if (pool == nullptr) {
      m->pool_ = std::make_unique<ThreadPool>(f.threads);
      pool = m->pool_.get();
    }
    auto engine = Engine::create(*m->model_, *m->tokenizer_, ec, *pool);
    if (!engine) return engine.error();
    m->engine_ = std::move(*engine);
    m->loop_ = std::make_unique<EngineLoop>(*m->engine_);
    server::ServerConfig config = base;
    config.own_transport = false;
    config.api_key.clear();       // the router checked it
    config.shutdown_grace_s = 0;  // the router spends the grace (ModelHost::drain)
    config.model_aliases = spec.aliases;
    config.strict_model_names = false;  // the router resolved the name
    config.on_idle = std::move(on_idle);
    m->http_ = std::make_unique<server::HttpServer>(config, *m->loop_, *m->tokenizer_, *m->chat_);
    return std::unique_ptr<server::ServedModel>(std::move(m));
  }

 private:
  LoadedModel() = default;
  DiskTier* disk_ = nullptr;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<server::ChatFormatter> chat_;
  std::unique_ptr<ThreadPool> pool_;  // null with --shared-pool
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<server::HttpServer> http_;
};

// The model files: every -m, then --models DIR's .gguf files by name.
Result<std::vector<std::string>> model_files(const ServeFlags& f) {
  std::vector<std::string> paths = f.model_paths;
  if (!f.models_dir.empty()) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(f.models_dir, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".gguf") found.push_back(entry.path().string());
    }
    if (ec) return make_error("--models {}: {}", f.models_dir, ec.message());
    if (found.empty()) return make_error("--models {}: no .gguf file in it", f.models_dir);
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// --model-alias ID=NAME, each onto its model; a name may stand for one model only.
Result<void> apply_aliases(const ServeFlags& f, std::vector<server::ModelSpec>& specs) {
  std::map<std::string, std::string> taken;  // name → model id
  for (const auto& s : specs) taken.emplace(s.id, s.id);
  for (const std::string& a : f.model_aliases) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) {
      return make_error("--model-alias '{}': with several models write ID=NAME (e.g. {}=assistant)", a, specs[0].id);
    }
    const std::string id = a.substr(0, eq);
    const std::string name = a.substr(eq + 1);
    auto it = std::find_if(specs.begin(), specs.end(), [&](const auto& s) { return s.id == id; });
    if (it == specs.end()) return make_error("--model-alias '{}': no model has the id '{}'", a, id);
    if (auto t = taken.find(name); t != taken.end()) {
      return make_error("--model-alias '{}': '{}' already names the model '{}'", a, name, t->second);
    }
    taken.emplace(name, id);
    it->aliases.push_back(name);
  }
  return {};
}

Result<std::chrono::milliseconds> parse_duration(const std::string& text) {
  if (text == "0") return std::chrono::milliseconds(0);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const double scale = unit == "ms"                  ? 1e-3
                       : unit == "s" || unit.empty() ? 1
                       : unit == "m"                 ? 60
                       : unit == "h"                 ? 3600
                                                     : -1;
  if (used == 0 || scale < 0 || !(v >= 0) || v * scale > 366.0 * 86400) {
    return make_error("'{}' is not a duration: write e.g. 30s, 5m, 2h or 0 (at most a year)", text);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(v * scale * 1000));
}

}  // namespace

Result<ServedMemory> served_model_memory(const GgufFile& file, const ServeFlags& f) {
  const int threads = f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto memory = estimate_model_memory(file, ForwardShape{f.max_batch_tokens, f.max_running, threads});
  if (!memory) return memory.error();
  // Beside the model's own: its engine, loop and routes, and its pool's thread stacks (a little above what a 110M
  // model holds beyond weights, a full KV pool, scratch and the process's own; docs/multi-model.md).
  constexpr int64_t kServingBytes = int64_t{4} << 20;
  return ServedMemory{memory->weights_bytes, memory->scratch_bytes + memory->tokenizer_bytes + kServingBytes};
}

ModelListing model_listing(const GgufFile& file, const std::string& path) {
  const GgufSummary summary = summarize_gguf(file);
  ModelListing out{summary.architecture, summary.num_params, summary.file_type, 0, {}};
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(path, ec);
  if (!ec) {
    const auto since_epoch = std::chrono::file_clock::to_sys(written).time_since_epoch();
    out.modified_unix_s = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  }
  return out;
}

Result<server::ModelSpec> describe_model(const ServeFlags& f, const std::string& path, int64_t kv_bytes) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return make_error("{}: {}", path, config.error().message);
  auto format = parse_kv_format(f.kv_dtype, f.kv_dtype_k, f.kv_dtype_v);
  if (!format) return format.error();
  const KvShape shape = config->kv_shape();
  auto cost = kv_token_cost(shape, *format);
  if (!cost) return cost.error();
  EngineConfig ec;  // what the engine will be given, for its window split
  ec.block_size = f.block_size;
  ec.max_batch_tokens = f.max_batch_tokens;
  ec.kv_window_slabs = !f.kv_full_window;
  ec.kv_window_plan_context = f.kv_window_context;
  ec.kv_memory_bytes = kv_bytes;
  ec.max_running = f.max_running;
  auto states = split_state_budget(*config, ec);  // hybrid models: recurrent states first, as the engine does
  if (!states) return make_error("{}: {}", path, states.error().message);
  auto plan = plan_kv_pool(shape, *cost, f.block_size, states->kv_budget_bytes, kv_window_split(*config, ec));
  if (!plan) return make_error("{}: {}", path, plan.error().message);
  const int64_t state_bytes = states->state_bytes * (states->running_slots + int64_t{states->checkpoint_slots});
  auto memory = served_model_memory(*file, f);
  if (!memory) return make_error("{}: {}", path, memory.error().message);
  server::ModelSpec spec;
  spec.id = std::filesystem::path(path).stem().string();
  spec.path = path;
  spec.cost = {memory->weights_bytes, plan->pool_bytes + state_bytes, memory->runtime_bytes};
  spec.n_ctx = config->n_ctx_train;
  spec.kv_plan = *plan;
  spec.listing = model_listing(*file, path);
  return spec;
}

int run_serve_models(ServeFlags f, int64_t kv_bytes, int64_t max_body, const sigset_t& stop_signals) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  };
  auto budget = f.memory.empty() ? Result<int64_t>(default_memory_budget()) : parse_bytes(f.memory);
  if (!budget) return fail("--memory: " + budget.error().message);
  auto keep_alive = parse_duration(f.keep_alive);
  if (!keep_alive) return fail("--keep-alive: " + keep_alive.error().message);
  auto paths = model_files(f);
  if (!paths) return fail(paths.error().message);
  std::vector<server::ModelSpec> specs;
  for (const std::string& p : *paths) {
    auto spec = describe_model(f, p, kv_bytes);
    if (!spec) return fail(spec.error().message);
    for (const auto& s : specs) {
      if (s.id == spec->id) return fail(fmt::format("two models have the id '{}' ({} and {})", s.id, s.path, p));
    }
    specs.push_back(std::move(*spec));
  }
  if (auto aliased = apply_aliases(f, specs); !aliased) return fail(aliased.error().message);
  // The process's own memory, before any model: the budget counts it as used.
  const auto process_bytes = static_cast<int64_t>(resident_bytes());
  spdlog::info("memory budget {} (--memory{}): the server's own {} plus each loaded model's resident weights, KV "
               "pool and scratch",
               format_bytes(*budget), f.memory.empty() ? ", default 75% of RAM" : "", format_bytes(process_bytes));
  for (const auto& s : specs) {
    spdlog::info("model '{}': {} = {} weights + {} KV pool ({}) + {} scratch and tokenizer{}", s.id, format_bytes(s.cost.total()),
                 format_bytes(s.cost.weights_bytes), format_bytes(s.cost.kv_bytes), describe_kv_plan(s.kv_plan),
                 format_bytes(s.cost.runtime_bytes),
                 s.cost.total() > *budget - process_bytes ? " -- larger than the budget: requests for it will be refused"
                                                          : "");
  }

  auto opened_tier = open_disk_tier(f);
  if (!opened_tier) return fail(opened_tier.error().message);
  std::unique_ptr<DiskTier> disk_tier = std::move(*opened_tier);
  auto opened_redis = open_redis_tier(f);
  if (!opened_redis) return fail(opened_redis.error().message);
  std::unique_ptr<RedisTier> redis_tier = std::move(*opened_redis);
  std::unique_ptr<ThreadPool> shared_pool = f.shared_pool ? std::make_unique<ThreadPool>(f.threads) : nullptr;

  server::ServerConfig base;
  base.answer_memory_entries = static_cast<size_t>(f.answer_memory);
  base.strict_max_tokens = f.strict_max_tokens;
  auto store_limits = responses_store_limits(f);
  if (!store_limits) return std::fprintf(stderr, "error: %s\n", store_limits.error().message.c_str()), 1;
  base.responses_store = *store_limits;
  server::ModelHostConfig host_config;
  host_config.budget_bytes = *budget;
  host_config.process_bytes = process_bytes;
  host_config.keep_alive = *keep_alive;
  server::ModelHost* host_ptr = nullptr;  // set before the first load (the loader runs only inside acquire)
  auto loader = [&](const server::ModelSpec& spec, size_t index) {
    return LoadedModel::load(f, spec, kv_bytes, base, disk_tier.get(), redis_tier.get(), shared_pool.get(),
                             [&host_ptr, index] { host_ptr->notify_idle(index); });
  };
  auto host = std::make_unique<server::ModelHost>(host_config, std::move(specs), loader);
  host_ptr = host.get();

  server::ModelRouterConfig config;
  config.api_key = f.api_key;
  config.tenants = f.tenants;
  config.http.host = f.host;
  config.http.port = f.port;
  if (f.ollama_port >= 0) config.http.extra_ports = {f.ollama_port};
  config.http.max_body_bytes = static_cast<size_t>(max_body);
  config.http.max_connections = f.max_connections;
  config.http.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.header_timeout_s * 1000));
  config.http.body_idle_timeout = config.http.header_timeout;
  config.http.cors.allowed_origins = f.allow_origins;
  config.shutdown_grace_s = f.shutdown_grace_s;
  config.strict_model_names = f.strict_model_names;
  server::ModelRouter router(config, *host);
  if (auto bound = router.bind(); !bound) return fail(bound.error().message);

  std::vector<nlohmann::json> warm_bodies;
  if (!f.warm_file.empty()) {
    auto bodies = read_warm_file(f.warm_file);
    if (!bodies) return fail("--warm: " + bodies.error().message);
    warm_bodies = std::move(*bodies);
  }
  std::thread warm_thread([&] {
    for (size_t i = 0; i < warm_bodies.size(); ++i) {
      auto result = router.warm(warm_bodies[i]);
      if (!result) {
        spdlog::warn("--warm line {}: {}", i + 1, result.error().message);
      } else {
        const nlohmann::json& r = *result;
        spdlog::info("--warm line {} ({}): {} tokens, {} were cached ({} from disk), {} pinned", i + 1,
                     r.value("model", ""), r["prompt_tokens"].get<int>(), r["cached_tokens"].get<int>(),
                     r["tiers"]["disk"].get<int>(), r.value("pinned_tokens", 0));
      }
    }
  });
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    watch_stop_signals(
        stop_signals, done, [&] { router.shutdown(); }, [&] { router.cut_grace(); }, tenant_keys_reloader(f));
  });

  std::string ids;
  for (const auto& s : host->specs()) ids += (ids.empty() ? "" : ", ") + s.id;
  // Tests and scripts read the port from this line (--port 0 picks a free one).
  std::printf("hearth: serving %zu models (%s) in %s on http://%s:%d%s\n", host->specs().size(), ids.c_str(),
              format_bytes(*budget).c_str(), f.host.c_str(), router.bound_port(), auth_note(f));
  for (int port : router.bound_extra_ports()) {
    std::printf("hearth: the same routes (Ollama's) on http://%s:%d\n", f.host.c_str(), port);
  }
  std::fflush(stdout);
  router.listen();
  done = true;
  signal_thread.join();
  warm_thread.join();
  host.reset();  // unloads every model; the disk tier gets their blocks
  spdlog::info("stopped");
  return 0;
}

}  // namespace hearth::app

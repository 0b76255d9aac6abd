// hearth plan: the KV memory plan of a model from its GGUF (its header, and the small matrices' values checked): bytes per
// token for every KV dtype, KV and total memory for a context × users, and what fits in a memory budget.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/serve_flags.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "kv/kv_plan.h"
#include "model/config.h"
#include "server/cache/kv_plan_json.h"
#include "tensor/kv_dtype.h"
#include "util/process_memory.h"

namespace hearth::app {
namespace {

struct PlanFlags {
  std::vector<std::string> model_paths;  // one: the table; several: each model's needs and whether they fit together
  int64_t context = 0;  // 0: the model's training context
  int64_t users = 1;
  std::string kv_dtype = "f16";
  std::string kv_dtype_k;
  std::string kv_dtype_v;
  std::string memory;  // empty: no budget
  int32_t block_size = 16;
  bool kv_full_window = false;
  bool json = false;
};

// Sliding-window models: how many layers are local, what a user's KV costs with window slabs (Hearth's default:
// those layers keep only the blocks the window reads) and with every layer's full KV (--kv-full-window). Counted
// layer by layer over the layers that store K/V, as the pool is.
std::string describe_window_savings(const ModelConfig& c, const MemoryPlan& plan) {
  std::vector<bool> local_flags;
  int32_t local = 0;
  for (int32_t p = 0; p < c.n_kv_layers(); ++p) {
    local_flags.push_back(c.is_local(c.layer_of_kv_plane(p)));
    local += local_flags.back() ? 1 : 0;
  }
  if (local == 0 || c.sliding_window <= 0) return {};
  const MemoryPlanRequest& r = plan.request;
  const MemoryPlanRow& row = plan.requested();
  const auto cost =
      std::find_if(r.costs.begin(), r.costs.end(), [&](const KvTokenCost& k) { return k.dtype == row.dtype; });
  if (cost == r.costs.end()) return {};
  const int64_t blocks = (r.context + r.block_size - 1) / r.block_size;
  const int64_t window_block = kv_layer_bytes(*cost, local_flags) * r.block_size;
  const int64_t other_block = row.bytes_per_token * r.block_size - window_block;
  const int64_t held = window_blocks_held(r.context, c.sliding_window, r.block_size);
  const int64_t full = (other_block + window_block) * blocks;
  const int64_t windowed = other_block * blocks + window_block * held;
  const double saved = 100.0 * static_cast<double>(full - windowed) / static_cast<double>(full);
  if (r.window.n_window_layers > 0) {
    return fmt::format(
        "sliding window: {} of {} layers attend to the last {} tokens only, and Hearth keeps their K/V only for the "
        "blocks the window reads ({} of {} blocks at {} tokens), so the table is what it allocates: {} per user, "
        "where every layer's full KV would be {} ({:.0f}% less; --kv-full-window keeps it all).\n",
        local, c.n_kv_layers(), format_thousands(c.sliding_window), held, blocks, format_thousands(r.context),
        format_bytes(windowed), format_bytes(full), saved);
  }
  return fmt::format(
      "sliding window: {} of {} layers attend to the last {} tokens only. With --kv-full-window Hearth keeps every "
      "layer's full KV (the window only masks), so the table is what it allocates: {} per user at {} tokens; "
      "without it those layers keep only their window: {} ({:.0f}% less).\n",
      local, c.n_kv_layers(), format_thousands(c.sliding_window), format_bytes(full), format_thousands(r.context),
      format_bytes(windowed), saved);
}

// Models whose layers differ (sliding and global, Gemma 4's head sizes and shared K/V, a hybrid's recurrent layers):
// one token's K/V by layer group, as the pool counts it: each group's layers, KV heads, head size and bytes, the
// layers that read another layer's K/V and store none, and the recurrent layers, which keep a state instead.
std::string describe_layer_groups(const ModelConfig& c, const MemoryPlan& plan) {
  const KvShape& shape = plan.request.shape;
  bool any_local = false;
  for (int32_t il = 0; il < c.n_layers; ++il) any_local = any_local || (c.has_kv(il) && c.is_local(il));
  if (shape.uniform() && c.n_kv_shared_layers == 0 && !any_local && !c.is_hybrid()) return {};
  const MemoryPlanRow& row = plan.requested();
  const auto cost = std::find_if(plan.request.costs.begin(), plan.request.costs.end(),
                                 [&](const KvTokenCost& k) { return k.dtype == row.dtype; });
  if (cost == plan.request.costs.end()) return {};
  struct Group {
    bool local;
    KvLayerShape shape;
    int32_t layers = 0;
    int64_t bytes = 0;
  };
  std::vector<Group> groups;
  for (int32_t il = 0; il < shape.n_layers; ++il) {
    const KvLayerShape l = shape.layer(il);
    const bool local = c.is_local(c.layer_of_kv_plane(il));
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.local == local && x.shape.n_kv_heads == l.n_kv_heads && x.shape.head_dim == l.head_dim;
    });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{local, l});
    g->layers += 1;
    g->bytes += cost->layer_bytes_per_token[il];
  }
  std::string out = fmt::format("KV per token ({}), layer by layer:\n", row.dtype);
  for (const Group& g : groups) {
    out += fmt::format("  {:>3} {} layers x {} KV heads x head size {}: {}/token\n", g.layers,
                       g.local ? "sliding" : "global ", g.shape.n_kv_heads, g.shape.head_dim, format_bytes(g.bytes));
  }
  if (c.n_kv_shared_layers > 0) {
    out += fmt::format("  {:>3} shared-KV layers read an earlier layer's K/V and store none\n", c.n_kv_shared_layers);
  }
  if (c.is_hybrid()) {
    out += fmt::format("  {:>3} Gated DeltaNet layers keep a recurrent state ({} per user) and no K/V\n",
                       c.n_recurrent_layers(), format_bytes(plan.request.state_bytes_per_user));
  }
  out += fmt::format("  total {}/token over {} of {} layers\n", format_bytes(row.bytes_per_token), shape.n_layers,
                     c.n_layers);
  return out;
}

struct ModelPlan {
  std::string id;
  ModelConfig config;
  MemoryPlan plan;
};

Result<ModelPlan> plan_model(const PlanFlags& f, const std::string& path, int64_t process_bytes) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return make_error("{}: {}", path, config.error().message);
  auto format = parse_kv_format(f.kv_dtype, f.kv_dtype_k, f.kv_dtype_v);
  if (!format) return format.error();
  MemoryPlanRequest request;
  request.shape = config->kv_shape();
  // What hearth serve with its default flags holds beside the KV: the model's resident weights and runtime, and the
  // server's own memory (this binary's now: the server measures its own at start, within a MiB of it).
  auto memory = served_model_memory(*file, ServeFlags{});
  if (!memory) return make_error("{}: {}", path, memory.error().message);
  request.weights_bytes = memory->weights_bytes;
  request.other_bytes = memory->runtime_bytes + process_bytes;
  request.block_size = f.block_size;
  request.context = f.context > 0 ? f.context : config->n_ctx_train;
  request.users = f.users;
  request.costs = kv_dtype_costs(request.shape, *format);
  request.dtype = format->name();
  EngineConfig ec;  // what hearth serve gives the engine by default, for its window split
  ec.block_size = f.block_size;
  ec.kv_window_slabs = !f.kv_full_window;
  request.window = kv_window_split(*config, ec);
  request.state_bytes_per_user = config->recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
  if (!f.memory.empty()) {
    auto memory = parse_bytes(f.memory);
    if (!memory) return make_error("--memory: {}", memory.error().message);
    request.memory_bytes = *memory;
  }
  auto plan = plan_memory(request);
  if (!plan) return make_error("{}: {}", path, plan.error().message);
  return ModelPlan{std::filesystem::path(path).stem().string(), *config, std::move(*plan)};
}

// Several models in one budget (hearth serve -m a -m b --memory N): each at the context × users asked, all loaded
// at once, and one at a time (the server then switches: least recently used unloads).
int run_plan_models(const PlanFlags& f, const std::vector<ModelPlan>& models) {
  const int64_t budget = models.front().plan.request.memory_bytes;
  int64_t all = 0;
  int64_t largest = 0;
  std::string largest_id;
  nlohmann::json rows = nlohmann::json::array();
  std::string table = fmt::format("{:<28} {:>12} {:>12} {:>12}\n", "model", "weights", "KV", "total");
  for (const ModelPlan& m : models) {
    const MemoryPlanRow& row = m.plan.requested();
    all += row.total_bytes;
    if (row.total_bytes > largest) largest = row.total_bytes, largest_id = m.id;
    table += fmt::format("{:<28} {:>12} {:>12} {:>12}\n", m.id, format_bytes(m.plan.request.weights_bytes),
                         format_bytes(row.kv_bytes), format_bytes(row.total_bytes));
    nlohmann::json j = server::memory_plan_json(m.plan);
    j["id"] = m.id;
    rows.push_back(std::move(j));
  }
  const MemoryPlanRequest& r = models.front().plan.request;
  const std::string context =
      f.context > 0 ? format_thousands(r.context) + " tokens of context" : "its training context";
  const std::string what = fmt::format("These {} models ({} for {} user{} each, {} KV)", models.size(), context,
                                       r.users, r.users == 1 ? "" : "s", r.dtype);
  std::string verdict;
  if (budget <= 0) {
    verdict = fmt::format(
        "{}: {} with every model loaded, {} for the largest ({}) alone. Give --memory to see "
        "what fits.",
        what, format_bytes(all), format_bytes(largest), largest_id);
  } else if (all <= budget) {
    verdict = fmt::format("{} fit in {} at once: {} used, {} to spare.", what, format_bytes(budget), format_bytes(all),
                          format_bytes(budget - all));
  } else if (largest <= budget) {
    verdict = fmt::format(
        "{} do not fit in {} at once ({} needed, {} short), but each fits alone (the largest, {}, needs {}): "
        "hearth serve switches between them, unloading the least recently used; their caches wait in the disk tier.",
        what, format_bytes(budget), format_bytes(all), format_bytes(all - budget), largest_id, format_bytes(largest));
  } else {
    verdict = fmt::format(
        "{} do not fit in {}: {} alone needs {} ({} short). Shorter context, fewer users or a "
        "smaller --kv-dtype would help; the table above shows each model's share.",
        what, format_bytes(budget), largest_id, format_bytes(largest), format_bytes(largest - budget));
  }
  if (f.json) {
    nlohmann::json out = {{"models", std::move(rows)},
                          {"all_loaded_bytes", all},
                          {"largest_bytes", largest},
                          {"largest_model", largest_id},
                          {"verdict", verdict}};
    if (budget > 0) {
      out["memory_bytes"] = budget;
      out["fits_at_once"] = all <= budget;
      out["fits_one_at_a_time"] = largest <= budget;
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s%s\n", table.c_str(), verdict.c_str());
    std::printf(
        "(weights at their file size; KV = users x whole blocks of the context; hearth serve sizes each "
        "model's pool with --kv-memory)\n");
  }
  return 0;
}

int run_plan(const PlanFlags& f) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  };
  const auto process_bytes = static_cast<int64_t>(resident_bytes());
  std::vector<ModelPlan> models;
  for (const std::string& path : f.model_paths) {
    auto m = plan_model(f, path, process_bytes);
    if (!m) return fail(m.error().message);
    models.push_back(std::move(*m));
  }
  if (models.size() > 1) return run_plan_models(f, models);
  const ModelConfig* config = &models.front().config;
  const MemoryPlan* plan = &models.front().plan;
  const MemoryPlanRequest& request = plan->request;
  if (f.json) {
    std::printf("%s\n", server::memory_plan_json(*plan).dump(2).c_str());
  } else {
    std::printf("%s", render_memory_plan(*plan).c_str());
    std::printf("%s", describe_layer_groups(*config, *plan).c_str());
    std::printf("%s", describe_window_savings(*config, *plan).c_str());
    if (request.context > config->n_ctx_train) {
      std::printf("note: %lld tokens is beyond the model's training context of %d\n",
                  static_cast<long long>(request.context), config->n_ctx_train);
    }
  }
  return 0;
}

}  // namespace

Result<KvFormat> parse_kv_format(const std::string& both, const std::string& k, const std::string& v) {
  auto base = parse_kv_dtype(both);
  if (!base) return base.error();
  KvFormat format{*base, *base};
  if (!k.empty()) {
    auto kt = parse_kv_dtype(k);
    if (!kt) return kt.error();
    format.k = *kt;
  }
  if (!v.empty()) {
    auto vt = parse_kv_dtype(v);
    if (!vt) return vt.error();
    format.v = *vt;
  }
  return format;
}

Command add_plan(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  app.add_option("-m,--model", flags->model_paths,
                 "GGUF model file (only its header is read); repeat it for several models in one --memory budget")
      ->required();
  app.add_option("--ctx", flags->context, "Tokens of context per user (default: the model's training context)");
  app.add_option("--users", flags->users, "Users holding that context at once")->capture_default_str();
  app.add_option("--kv-dtype", flags->kv_dtype, "KV dtype the totals are for: f32, f16, bf16, q8_0, q4_0")
      ->capture_default_str();
  app.add_option("--kv-dtype-k", flags->kv_dtype_k, "KV dtype of keys (overrides --kv-dtype)");
  app.add_option("--kv-dtype-v", flags->kv_dtype_v, "KV dtype of values (overrides --kv-dtype)");
  app.add_option("--memory", flags->memory,
                 "Memory budget, e.g. 8GiB: shows the longest context and most users that fit");
  app.add_option("--block-size", flags->block_size, "Tokens per KV block")->capture_default_str();
  app.add_flag("--kv-full-window", flags->kv_full_window,
               "Sliding-window models: plan for every layer's full KV (hearth serve --kv-full-window)");
  app.add_flag("--json", flags->json, "Print JSON for scripts");
  return [flags] { return run_plan(*flags); };
}

}  // namespace hearth::app

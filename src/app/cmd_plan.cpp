// hearth plan: the KV memory plan of a model from its GGUF header alone (no weights are read): bytes per
// token for every KV dtype, KV and total memory for a context × users, and what fits in a memory budget.

#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.h"
#include "gguf/gguf_file.h"
#include "kv/kv_plan.h"
#include "model/config.h"
#include "server/kv_plan_json.h"
#include "tensor/kv_dtype.h"

namespace hearth::app {
namespace {

struct PlanFlags {
  std::string model_path;
  int64_t context = 0;  // 0: the model's training context
  int64_t users = 1;
  std::string kv_dtype = "f16";
  std::string kv_dtype_k;
  std::string kv_dtype_v;
  std::string memory;  // empty: no budget
  int32_t block_size = 16;
  bool json = false;
};

// Sliding-window models: how many layers are local, and what their KV would cost if those layers kept only their
// window (a ring buffer) instead of the whole context, as Hearth does today (the window is a mask over full KV).
std::string describe_window_savings(const ModelConfig& c, const MemoryPlan& plan) {
  int32_t local = 0;
  for (int32_t il = 0; il < c.n_layers; ++il) local += c.is_local(il) ? 1 : 0;
  if (local == 0) return {};
  const MemoryPlanRequest& r = plan.request;
  const MemoryPlanRow& row = plan.requested();
  const int64_t per_layer_token = row.bytes_per_token / c.n_layers;
  const int64_t windowed = std::min<int64_t>(r.context, c.sliding_window);
  const int64_t full = row.bytes_per_token * r.context;
  const int64_t ring = per_layer_token * ((c.n_layers - local) * r.context + local * windowed);
  return fmt::format(
      "sliding window: {} of {} layers attend to the last {} tokens only. Hearth keeps every layer's full KV (the "
      "window is a mask), so the table is what it allocates: {} per user at {} tokens. Keeping only the window on "
      "those layers would need {} ({:.0f}% less); not implemented yet.\n",
      local, c.n_layers, format_thousands(c.sliding_window), format_bytes(full), format_thousands(r.context),
      format_bytes(ring), 100.0 * static_cast<double>(full - ring) / static_cast<double>(full));
}

int run_plan(const PlanFlags& f) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  };
  auto file = GgufFile::open(f.model_path);
  if (!file) return fail(file.error().message);
  auto config = ModelConfig::from_gguf(*file);
  if (!config) return fail(config.error().message);
  auto format = parse_kv_format(f.kv_dtype, f.kv_dtype_k, f.kv_dtype_v);
  if (!format) return fail(format.error().message);
  MemoryPlanRequest request;
  request.shape = {config->n_layers, config->n_kv_heads, config->head_dim};
  request.weights_bytes = static_cast<int64_t>(file->tensor_data_bytes());
  request.block_size = f.block_size;
  request.context = f.context > 0 ? f.context : config->n_ctx_train;
  request.users = f.users;
  request.costs = kv_dtype_costs(request.shape, *format);
  request.dtype = format->name();
  if (!f.memory.empty()) {
    auto memory = parse_bytes(f.memory);
    if (!memory) return fail("--memory: " + memory.error().message);
    request.memory_bytes = *memory;
  }
  auto plan = plan_memory(request);
  if (!plan) return fail(plan.error().message);
  if (f.json) {
    std::printf("%s\n", server::memory_plan_json(*plan).dump(2).c_str());
  } else {
    std::printf("%s", render_memory_plan(*plan).c_str());
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
  app.add_option("-m,--model", flags->model_path, "GGUF model file (only its header is read)")->required();
  app.add_option("--ctx", flags->context, "Tokens of context per user (default: the model's training context)");
  app.add_option("--users", flags->users, "Users holding that context at once")->capture_default_str();
  app.add_option("--kv-dtype", flags->kv_dtype, "KV dtype the totals are for: f32, f16, bf16, q8_0, q4_0")
      ->capture_default_str();
  app.add_option("--kv-dtype-k", flags->kv_dtype_k, "KV dtype of keys (overrides --kv-dtype)");
  app.add_option("--kv-dtype-v", flags->kv_dtype_v, "KV dtype of values (overrides --kv-dtype)");
  app.add_option("--memory", flags->memory,
                 "Memory budget, e.g. 8GiB: shows the longest context and most users that fit");
  app.add_option("--block-size", flags->block_size, "Tokens per KV block")->capture_default_str();
  app.add_flag("--json", flags->json, "Print JSON for scripts");
  return [flags] { return run_plan(*flags); };
}

}  // namespace hearth::app

#pragma once
// The `hearth` subcommands. Each registers its flags on the CLI app and returns the function that runs it.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "tensor/kv_dtype.h"
#include "util/result.h"

namespace hearth::app {

using Command = std::function<int()>;

// --kv-dtype with optional --kv-dtype-k / --kv-dtype-v overrides (empty: not given).
Result<KvFormat> parse_kv_format(const std::string& both, const std::string& k, const std::string& v);

Command add_generate(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_explain(CLI::App& app);
Command add_bench_household(CLI::App& app);
Command add_bench_model(CLI::App& app);  // `hearth bench model`
Command add_devices(CLI::App& app);      // `hearth devices`: the Vulkan devices (src/gpu)

}  // namespace hearth::app

#pragma once
// The `hearth` subcommands. Each registers its flags on the CLI app and returns the function that runs it.

#include <CLI/CLI.hpp>

#include <functional>

namespace hearth::app {

using Command = std::function<int()>;

Command add_generate(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_bench_model(CLI::App& app);  // `hearth bench model`

}  // namespace hearth::app

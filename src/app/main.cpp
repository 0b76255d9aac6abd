// hearth: CLI entry point. Flags become config structs; the work happens in the libraries.

#include <CLI/CLI.hpp>

#include <map>

#include "app/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Hearth: a self-hosted LLM inference server that never prefills the same prompt twice"};
  app.require_subcommand(1);
  std::map<CLI::App*, hearth::app::Command> commands;
  auto add = [&](auto adder, const char* name, const char* help) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands[sub] = adder(*sub);
  };
  add(hearth::app::add_generate, "generate", "Generate text from a prompt with a GGUF model");
  add(hearth::app::add_inspect, "inspect", "Describe a GGUF file: architecture, shapes, tensor types, size");
  add(hearth::app::add_serve, "serve", "Serve a GGUF model over an OpenAI-compatible HTTP API");
  add(hearth::app::add_plan, "plan", "KV memory plan: bytes per token by KV dtype, and what fits in a budget");
  add(hearth::app::add_explain, "explain", "Show where two prompts diverge for the prefix cache (tokenizer only)");
  add(hearth::app::add_synth, "synth", "Write a synthetic llama GGUF with random weights at a chosen shape");
  add(hearth::app::add_devices, "devices", "List the Vulkan devices (index, name, type, VRAM) Hearth can compute on");
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* household = bench->add_subcommand(
      "household", "Household workload (shared prefix, multi-turn chats) against any OpenAI-compatible server");
  commands[household] = hearth::app::add_bench_household(*household);
  CLI::App* bench_model =
      bench->add_subcommand("model", "Prefill and decode speed as fractions of this machine's limits");
  commands[bench_model] = hearth::app::add_bench_model(*bench_model);
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 1;
}

// The named shapes of synthetic models (synth.h's synth_preset): the shared synth-tiny's, dense llama sizes, and the
// published configs of the MoE and hybrid families people run, each with its context cut to 4096.

#include <fmt/format.h>

#include "model/synth.h"

namespace hearth {

std::optional<SynthConfig> synth_preset(std::string_view name) {
  struct Preset {
    std::string_view name;
    int64_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, context_length;
  };
  static constexpr Preset kPresets[] = {
      {"tiny", 256, 2, 4, 2, 768, 1024},   {"110m", 768, 12, 12, 12, 2048, 4096}, {"1b", 2048, 16, 32, 8, 8192, 4096},
      {"3b", 3072, 28, 24, 8, 8192, 4096}, {"8b", 4096, 32, 32, 8, 14336, 8192},
  };
  if (name == "minilm-l6" || name == "nomic-embed") {  // all-MiniLM-L6-v2's and nomic-embed-text-v1.5's shapes
    const bool minilm = name == "minilm-l6";
    SynthConfig c;
    c.name = fmt::format("hearth-synthetic-{}", name);
    c.architecture = minilm ? "bert" : "nomic-bert";
    c.dim = minilm ? 384 : 768;
    c.n_layers = minilm ? 6 : 12;
    c.n_heads = 12;
    c.n_kv_heads = 12;
    c.ffn_dim = minilm ? 1536 : 3072;
    c.context_length = minilm ? 512 : 2048;
    c.rope_freq_base = 1000.0f;
    c.pooling_type = 1;
    return c;
  }
  if (name == "gpt-oss-20b") {  // gpt-oss-20b's config.json, context cut to 4096
    SynthConfig c;
    c.name = "hearth-synthetic-gpt-oss-20b";
    c.architecture = "gpt-oss";
    c.dim = 2880;
    c.n_layers = 24;
    c.n_heads = 64;
    c.n_kv_heads = 8;
    c.head_dim = 64;
    c.ffn_dim = 2880;
    c.n_expert = 32;
    c.n_expert_used = 4;
    c.expert_ffn_dim = 2880;
    c.context_length = 4096;
    c.sliding_window = 128;
    c.rope_freq_base = 150000.0f;
    c.rope_factor = 32.0f;
    c.rope_original_context = 4096;
    return c;
  }
  if (name == "qwen35-0.8b") {  // Qwen3.5-0.8B's config.json (text), context cut to 4096
    SynthConfig c;
    c.name = "hearth-synthetic-qwen35-0.8b";
    c.architecture = "qwen35";
    c.dim = 1024;
    c.n_layers = 24;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 256;
    c.ffn_dim = 3584;
    c.ssm_d_state = 128;
    c.ssm_n_k_heads = 16;
    c.ssm_n_v_heads = 16;
    c.rope_dim = 64;
    c.context_length = 4096;
    c.rope_freq_base = 10000000.0f;
    c.rms_eps = 1e-6f;
    return c;
  }
  if (name == "qwen35-35b-a3b") {  // Qwen3.5-35B-A3B's config.json (text), context cut to 4096
    SynthConfig c;
    c.name = "hearth-synthetic-qwen35-35b-a3b";
    c.architecture = "qwen35moe";
    c.dim = 2048;
    c.n_layers = 40;
    c.n_heads = 16;
    c.n_kv_heads = 2;
    c.head_dim = 256;
    c.ffn_dim = 512;  // the shared expert's width
    c.n_expert = 256;
    c.n_expert_used = 8;
    c.expert_ffn_dim = 512;
    c.ssm_d_state = 128;
    c.ssm_n_k_heads = 16;
    c.ssm_n_v_heads = 32;
    c.rope_dim = 64;
    c.context_length = 4096;
    c.rope_freq_base = 10000000.0f;
    c.rms_eps = 1e-6f;
    return c;
  }
  if (name == "qwen3next-80b-a3b") {  // Qwen3-Next-80B-A3B's config.json, context cut to 4096
    auto c = synth_preset("qwen35-35b-a3b");
    c->name = "hearth-synthetic-qwen3next-80b-a3b";
    c->architecture = "qwen3next";
    c->n_layers = 48;
    c->n_expert = 512;
    c->n_expert_used = 10;
    return c;
  }
  if (name == "30b-a3b") {  // Qwen3-30B-A3B's config.json, context cut to 4096
    SynthConfig c;
    c.name = "hearth-synthetic-30b-a3b";
    c.architecture = "qwen3moe";
    c.dim = 2048;
    c.n_layers = 48;
    c.n_heads = 32;
    c.n_kv_heads = 4;
    c.head_dim = 128;
    c.ffn_dim = 6144;
    c.n_expert = 128;
    c.n_expert_used = 8;
    c.expert_ffn_dim = 768;
    c.context_length = 4096;
    c.rope_freq_base = 1000000.0f;
    c.rms_eps = 1e-6f;
    return c;
  }
  for (const Preset& p : kPresets) {
    if (p.name != name) continue;
    SynthConfig c;
    c.name = fmt::format("hearth-synthetic-{}", p.name);
    c.dim = p.dim;
    c.n_layers = p.n_layers;
    c.n_heads = p.n_heads;
    c.n_kv_heads = p.n_kv_heads;
    c.ffn_dim = p.ffn_dim;
    c.context_length = p.context_length;
    return c;
  }
  return std::nullopt;
}

}  // namespace hearth

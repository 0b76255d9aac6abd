#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "app/commands.h"
#include "model/pooling.h"
#include "model/synth.h"

namespace hearth::app {
namespace {

struct SynthFlags {
  std::string preset = "tiny";
  std::string type = "q8_0";
  SynthConfig overrides;
  bool rope_freqs = false;
  int64_t longrope_original = 0;  // phi3: LongRoPE factors for this original context (0: none)
  float rope_base = 0.0f;  // 0: the architecture's default
  bool has_dim = false, has_layers = false, has_heads = false, has_kv_heads = false, has_ffn = false, has_ctx = false;
  bool has_arch = false, has_head_dim = false, has_experts = false, has_experts_used = false, has_expert_ffn = false;
  // qwen35's DeltaNet shape, when given (else the preset's, or the generator's defaults).
  std::optional<int64_t> ssm_state, ssm_k_heads, ssm_v_heads, ssm_conv, full_attention_interval, rope_dim, nextn_layers;
};

const std::map<std::string, DType> kWeightTypes = {
    {"f32", DType::F32},   {"f16", DType::F16},     {"bf16", DType::BF16},
    {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0},   {"q4_k", DType::Q4_K},
    {"q6_k", DType::Q6_K}, {"q4_k_m", DType::Q4_K}, {"mxfp4", DType::MXFP4},
};

int run_synth(const SynthFlags& f) {
  auto preset = synth_preset(f.preset);
  if (!preset) {
    std::fprintf(stderr,
                 "error: unknown preset '%s' (tiny, 110m, 1b, 3b, 8b, 30b-a3b, gpt-oss-20b, qwen35-0.8b, "
                 "qwen35-35b-a3b, qwen3next-80b-a3b, minilm-l6, nomic-embed)\n",
                 f.preset.c_str());
    return 1;
  }
  SynthConfig c = *preset;
  const SynthConfig& o = f.overrides;
  c.out_path = o.out_path;
  c.vocab_from = o.vocab_from;
  c.chat_template = o.chat_template;
  c.extra_control_tokens = o.extra_control_tokens;
  c.seed = o.seed;
  c.sliding_window = o.sliding_window;
  c.pooling_type = o.pooling_type;
  c.add_eos = o.add_eos;
  // 30b-a3b is qwen3moe, qwen35-0.8b qwen35 and qwen35-35b-a3b qwen35moe unless told
  if (f.has_arch || (c.n_expert == 0 && c.architecture != "qwen35" && !synth_is_encoder(c.architecture))) {
    c.architecture = o.architecture;
  }
  if (f.ssm_state) c.ssm_d_state = *f.ssm_state;
  if (f.ssm_k_heads) c.ssm_n_k_heads = *f.ssm_k_heads;
  if (f.ssm_v_heads) c.ssm_n_v_heads = *f.ssm_v_heads;
  if (f.ssm_conv) c.ssm_d_conv = *f.ssm_conv;
  if (f.full_attention_interval) c.full_attention_interval = *f.full_attention_interval;
  if (f.rope_dim) c.rope_dim = *f.rope_dim;
  if (f.nextn_layers) c.nextn_layers = *f.nextn_layers;
  c.weight_type = kWeightTypes.at(f.type);
  c.q4_k_m = f.type == "q4_k_m";  // llama-quantize's mix: Q6_K for the output and some attn_v and ffn_down
  c.llama3_rope_freqs = f.rope_freqs;
  if (f.rope_freqs) c.rope_freq_base = 500000.0f;  // Llama 3's
  if (f.rope_base > 0) c.rope_freq_base = f.rope_base;
  c.phi3_longrope = f.longrope_original > 0;
  if (c.phi3_longrope) c.rope_original_context = f.longrope_original;
  if (f.has_dim) c.dim = o.dim;
  if (f.has_layers) c.n_layers = o.n_layers;
  if (f.has_heads) c.n_heads = o.n_heads;
  if (f.has_kv_heads) c.n_kv_heads = o.n_kv_heads;
  if (f.has_ffn) c.ffn_dim = o.ffn_dim;
  if (f.has_ctx) c.context_length = o.context_length;
  if (f.has_head_dim) c.head_dim = o.head_dim;
  if (f.has_experts) c.n_expert = o.n_expert;
  if (f.has_experts_used) c.n_expert_used = o.n_expert_used;
  if (f.has_expert_ffn) c.expert_ffn_dim = o.expert_ffn_dim;
  if (synth_is_encoder(c.architecture)) {  // every head its own K/V, a pooling (mean unless told), BERT's epsilon
    if (!f.has_kv_heads) c.n_kv_heads = c.n_heads;
    if (c.pooling_type < 0) c.pooling_type = static_cast<int32_t>(PoolingType::kMean);
    c.rms_eps = 1e-12f;
  }
  if (c.architecture == "gemma4") {  // Gemma 4's E-style knobs (synth.h); 0 takes the generator's default
    c.head_dim_swa = o.head_dim_swa;
    c.n_kv_heads_global = o.n_kv_heads_global;
    c.swa_period = o.swa_period;
    c.shared_kv_layers = o.shared_kv_layers;
    c.per_layer_dim = o.per_layer_dim;
  }
  if (c.architecture == "qwen3moe" && c.n_expert == 0) {  // a dense preset as qwen3moe: Qwen3-30B-A3B's routing
    c.n_expert = f.has_experts ? o.n_expert : 128;
    c.n_expert_used = f.has_experts_used ? o.n_expert_used : 8;
    c.expert_ffn_dim = f.has_expert_ffn ? o.expert_ffn_dim : c.ffn_dim / 8;
  }
  const bool qwen3next = c.architecture == "qwen3next";
  if ((c.architecture == "qwen35moe" || qwen3next) && c.n_expert == 0) {  // a dense preset: Qwen3.5-35B-A3B's or
                                                                          // Qwen3-Next-80B-A3B's routing
    c.n_expert = f.has_experts ? o.n_expert : (qwen3next ? 512 : 256);
    c.n_expert_used = f.has_experts_used ? o.n_expert_used : (qwen3next ? 10 : 8);
    c.expert_ffn_dim = f.has_expert_ffn ? o.expert_ffn_dim : c.ffn_dim / 8;
  }
  if (c.architecture == "gpt-oss" && c.n_expert == 0) {  // a dense preset as gpt-oss: gpt-oss-20b's routing
    c.n_expert = f.has_experts ? o.n_expert : 32;
    c.n_expert_used = f.has_experts_used ? o.n_expert_used : 4;
    c.expert_ffn_dim = f.has_expert_ffn ? o.expert_ffn_dim : c.ffn_dim;
  }
  auto written = write_synthetic_model(c);
  if (!written) {
    std::fprintf(stderr, "error: %s\n", written.error().message.c_str());
    return 1;
  }
  std::printf("wrote %s: %s, dim %lld, %lld layers, %lld heads of %lld (%lld KV), ffn %lld, context %lld, %s weights",
              c.out_path.c_str(), c.architecture.c_str(), static_cast<long long>(c.dim),
              static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads),
              static_cast<long long>(synth_head_dim(c)), static_cast<long long>(c.n_kv_heads),
              static_cast<long long>(c.ffn_dim), static_cast<long long>(c.context_length), f.type.c_str());
  if (c.n_expert > 0) {
    std::printf(", %lld experts of %lld (%lld used)", static_cast<long long>(c.n_expert),
                static_cast<long long>(c.expert_ffn_dim), static_cast<long long>(c.n_expert_used));
  }
  if (c.architecture == "qwen35moe" || qwen3next)
    std::printf(", a shared expert of %lld", static_cast<long long>(c.ffn_dim));
  std::printf("\n");
  return 0;
}

}  // namespace

Command add_synth(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  f->overrides.vocab_from = "../shared/models/stories260K.gguf";
  app.add_option("-o,--output", f->overrides.out_path, "Output GGUF path (e.g. models/synth-110m-q8_0.gguf)")
      ->required();
  app.add_option_function<std::string>(
         "--arch", [f](const std::string& v) { f->overrides.architecture = v, f->has_arch = true; },
         "Architecture: llama (default), qwen2 (q/k/v biases), qwen3 (q/k norms), qwen3moe (qwen3 with a "
         "mixture-of-experts FFN), phi3 (fused qkv and gate/up), gemma2 (soft-capping, every other layer local), "
         "gemma3 (q/k norms, 5 local : 1 global), gemma4 (gemma3 with per-layer head sizes and KV heads, value "
         "norm, partial RoPE on global layers, shared-KV layers, per-layer embeddings: see --shared-kv-layers, "
         "--per-layer-dim), gpt-oss (biases, attention sinks, YaRN, every other layer local, biased experts with a "
         "clamped SwiGLU), qwen35 (Qwen3.5 dense: three of four layers Gated DeltaNet, the fourth gated full "
         "attention with partial RoPE), qwen35moe (Qwen3.5-MoE: qwen35's layers with qwen3moe's experts and a "
         "sigmoid-gated shared expert of width --ffn), qwen3next (Qwen3-Next: qwen35moe with llama.cpp's fused "
         "ssm_in and ssm_ba DeltaNet projections, key heads grouped, plain neox RoPE), bert and nomic-bert "
         "(embedding encoders with a synthetic WordPiece vocabulary; --vocab-from is not read; pooling mean unless "
         "--pooling cls)")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "gemma4", "gpt-oss",
                             "qwen35", "qwen35moe", "qwen3next", "bert", "nomic-bert"}));
  app.add_option("--head-dim-swa", f->overrides.head_dim_swa, "gemma4: sliding layers' head size (0: head dim / 2)");
  app.add_option("--kv-heads-global", f->overrides.n_kv_heads_global,
                 "gemma4: global layers' KV heads (0: --kv-heads)");
  app.add_option("--swa-period", f->overrides.swa_period, "gemma4: every Nth layer is global (0: 5)");
  app.add_option("--shared-kv-layers", f->overrides.shared_kv_layers,
                 "gemma4: the last N layers read an earlier layer's K/V and store none");
  app.add_option("--per-layer-dim", f->overrides.per_layer_dim, "gemma4: per-layer embeddings' width (0: none)");
  app.add_flag("--rope-freqs", f->rope_freqs,
               "llama: Llama 3.1 RoPE scaling (rope_freqs.weight from factor 8, low 1, high 4, original context "
               "8192) and base 500000");
  app.add_option("--longrope", f->longrope_original,
                 "phi3: LongRoPE for this original context (rope_factors_long/short.weight, long factors up to 8, "
                 "rope.scaling.attn_factor and original_context_length; the long ones rotate when --ctx exceeds it)");
  app.add_option("--rope-base", f->rope_base, "RoPE frequency base (default 10000, 500000 with --rope-freqs)");
  app.add_option("--preset", f->preset,
                 "Shape: tiny, 110m, 1b, 3b, 8b, 30b-a3b (Qwen3-30B-A3B, qwen3moe), gpt-oss-20b (gpt-oss), qwen35-0.8b "
                 "(qwen35), qwen35-35b-a3b (qwen35moe), qwen3next-80b-a3b (qwen3next), minilm-l6 (bert), nomic-embed "
                 "(nomic-bert)")
      ->capture_default_str();
  app.add_option("--type", f->type,
                 "Weight type (mxfp4: qwen3moe, qwen35moe, qwen3next and gpt-oss, MXFP4 experts and Q8_0 for the other "
                 "matrices)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q4_k_m", "q6_k", "mxfp4"}))
      ->capture_default_str();
  app.add_option("--vocab-from", f->overrides.vocab_from, "GGUF whose tokenizer is copied")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--chat-template",
         [f](const std::string& path) {
           std::ifstream in(path, std::ios::binary);
           std::stringstream text;
           text << in.rdbuf();
           f->overrides.chat_template = text.str();
         },
         "Jinja file written as tokenizer.chat_template, in place of the vocabulary's (e.g. "
         "tests/data/openai-gpt-oss-120b.jinja for gpt-oss)")
      ->check(CLI::ExistingFile);
  app.add_option("--add-control-token", f->overrides.extra_control_tokens,
                 "Append a control token to the copied vocabulary (repeatable; for tests: Gemma 4's <turn|>)");
  app.add_option("--seed", f->overrides.seed, "Weight seed")->capture_default_str();
  app.add_option_function<std::string>(
         "--pooling",
         [f](const std::string& name) { f->overrides.pooling_type = static_cast<int32_t>(*pooling_from_name(name)); },
         "An embedding model: <arch>.pooling_type (last: Qwen3-Embedding; mean, cls)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  app.add_flag_function(
      "--add-eos", [f](int64_t) { f->overrides.add_eos = true; },
      "Write tokenizer.ggml.add_eos_token true: inputs end with the end-of-text token (Qwen3-Embedding)");
  app.add_option("--sliding-window", f->overrides.sliding_window,
                 "phi3, gemma2, gemma3: attention.sliding_window (0: phi3 the context, gemma 4096)")
      ->capture_default_str();
  app.add_option_function<int64_t>(
      "--dim", [f](int64_t v) { f->overrides.dim = v, f->has_dim = true; }, "Width");
  app.add_option_function<int64_t>(
      "--layers", [f](int64_t v) { f->overrides.n_layers = v, f->has_layers = true; }, "Layers");
  app.add_option_function<int64_t>(
      "--heads", [f](int64_t v) { f->overrides.n_heads = v, f->has_heads = true; }, "Attention heads");
  app.add_option_function<int64_t>(
      "--kv-heads", [f](int64_t v) { f->overrides.n_kv_heads = v, f->has_kv_heads = true; }, "KV heads");
  app.add_option_function<int64_t>(
      "--ffn", [f](int64_t v) { f->overrides.ffn_dim = v, f->has_ffn = true; }, "Feed-forward width");
  app.add_option_function<int64_t>(
      "--ctx", [f](int64_t v) { f->overrides.context_length = v, f->has_ctx = true; }, "Context length");
  app.add_option_function<int64_t>(
      "--head-dim", [f](int64_t v) { f->overrides.head_dim = v, f->has_head_dim = true; },
      "qwen3, qwen3moe, gemma, gpt-oss: head size (attention.key_length; default dim / heads)");
  app.add_option_function<int64_t>(
      "--experts", [f](int64_t v) { f->overrides.n_expert = v, f->has_experts = true; },
      "qwen3moe, qwen35moe, gpt-oss: experts per layer (default 128, qwen35moe 256, gpt-oss 32)");
  app.add_option_function<int64_t>(
      "--experts-used", [f](int64_t v) { f->overrides.n_expert_used = v, f->has_experts_used = true; },
      "qwen3moe, qwen35moe, gpt-oss: experts each token uses (default 8, gpt-oss 4)");
  app.add_option_function<int64_t>(
      "--expert-ffn", [f](int64_t v) { f->overrides.expert_ffn_dim = v, f->has_expert_ffn = true; },
      "qwen3moe, qwen35moe, gpt-oss: each expert's hidden width (default ffn / 8, gpt-oss ffn)");
  app.add_option_function<int64_t>(
      "--ssm-state", [f](int64_t v) { f->ssm_state = v; },
      "qwen35, qwen35moe: DeltaNet head size (ssm.state_size; default the head size)");
  app.add_option_function<int64_t>(
      "--ssm-k-heads", [f](int64_t v) { f->ssm_k_heads = v; },
      "qwen35, qwen35moe: DeltaNet key heads (ssm.group_count; default KV heads)");
  app.add_option_function<int64_t>(
      "--ssm-v-heads", [f](int64_t v) { f->ssm_v_heads = v; },
      "qwen35, qwen35moe: DeltaNet value heads (ssm.time_step_rank; default heads)");
  app.add_option_function<int64_t>(
      "--ssm-conv", [f](int64_t v) { f->ssm_conv = v; },
      "qwen35, qwen35moe: convolution taps (ssm.conv_kernel; default 4)");
  app.add_option_function<int64_t>(
      "--full-attention-interval", [f](int64_t v) { f->full_attention_interval = v; },
      "qwen35, qwen35moe: every Nth layer is full attention (default 4)");
  app.add_option_function<int64_t>(
      "--rope-dim", [f](int64_t v) { f->rope_dim = v; },
      "qwen35, qwen35moe: rotated dims per head (default head size / 4)");
  app.add_option_function<int64_t>(
      "--nextn-layers", [f](int64_t v) { f->nextn_layers = v; },
      "qwen35, qwen35moe, qwen3next: multi-token-prediction blocks after the --layers that run (nextn_predict_layers; "
      "default 0)");
  return [f] { return run_synth(*f); };
}

}  // namespace hearth::app

#include "model/config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace hearth {
namespace {

constexpr std::array<std::string_view, 16> kSupportedArchitectures = {
    "bert", "gemma2", "gemma3", "gemma4", "gpt-oss",   "llama",    "mistral",   "nomic-bert",
    "phi3", "qwen2",  "qwen3",  "qwen35", "qwen35moe", "qwen3moe", "qwen3next", "smollm"};

// llama.cpp's LLAMA_MAX_EXPERTS: a file with more experts is one the peer refuses too.
constexpr int32_t kMaxExperts = 512;

Result<int32_t> read_positive(const GgufFile& file, const std::string& key, std::optional<int32_t> fallback) {
  auto value = file.get_uint(key);
  if (!value) return value.error();
  if (!value->has_value()) {
    if (fallback) return *fallback;
    return make_error("{}: missing metadata key '{}'", file.name(), key);
  }
  const uint64_t v = **value;
  if (v == 0 || v > (1u << 30)) return make_error("{}: metadata '{}' = {} is out of range", file.name(), key, v);
  return static_cast<int32_t>(v);
}

// A float hyperparameter in (lo, hi]: NaN, infinities, zero or negative values (where lo is 0) and values that do
// not survive the narrowing to float are errors naming the key and the value.
Result<float> read_float(const GgufFile& file, const std::string& key, float fallback, double lo, double hi) {
  auto value = file.get_float(key);
  if (!value) return value.error();
  if (!value->has_value()) return fallback;
  const double v = **value;
  if (!std::isfinite(v) || !(v > lo && v <= hi) || !std::isfinite(static_cast<float>(v)) ||
      static_cast<float>(v) <= static_cast<float>(lo)) {
    return make_error("{}: metadata '{}' = {} is out of range ({}, {}]", file.name(), key, v, lo, hi);
  }
  return static_cast<float>(v);
}

// Upper bounds well above every real model, so that products of hyperparameters (q_dim, KV bytes per token,
// scratch sizes) stay far from int32 and int64 overflow; a header beyond them is broken or hostile.
Result<void> check_shape_limits(const GgufFile& file, const ModelConfig& c) {
  struct Limit {
    const char* what;
    int64_t value;
    int64_t max;
  };
  const Limit limits[] = {
      {"embedding_length", c.dim, int64_t{1} << 20},
      {"block_count", c.n_layers, int64_t{1} << 12},
      {"attention.head_count", c.n_heads, int64_t{1} << 12},
      {"attention.key_length", c.head_dim, int64_t{1} << 14},
      {"feed_forward_length", c.ffn_dim, int64_t{1} << 22},
      {"expert_feed_forward_length", c.moe.ffn_dim, int64_t{1} << 22},
      {"expert_shared_feed_forward_length", c.moe.shared_ffn_dim, int64_t{1} << 22},
      {"expert_count × expert_feed_forward_length", int64_t{c.moe.n_expert} * c.moe.ffn_dim, int64_t{1} << 26},
      {"attention.head_count × key_length", int64_t{c.n_heads} * c.head_dim, int64_t{1} << 20},
  };
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return make_error("{}: {}.{} = {} is above the supported maximum {}", file.name(), c.architecture, l.what,
                        l.value, l.max);
    }
  }
  return {};
}

// rope.scaling.type none or linear (absent: linear, as llama.cpp reads it) with rope.scaling.factor (or the older
// rope.scale_linear). Anything else (yarn, longrope, ...) would rotate differently, so it is refused by name.
Result<void> read_rope_scaling(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto type = file.get_string(p + "rope.scaling.type");
  if (!type) return type.error();
  const std::string kind = type->value_or("linear");
  const bool longrope = c.architecture == "phi3" && kind == "longrope";
  const bool yarn = c.architecture == "gpt-oss" && kind == "yarn";
  if (kind != "none" && kind != "linear" && !longrope && !yarn) {
    return make_error(
        "{}: metadata '{}rope.scaling.type' = '{}' is not supported (Hearth implements none and linear, "
        "longrope for phi3 and yarn for gpt-oss)",
        file.name(), p, kind);
  }
  c.rope_yarn = yarn;
  auto legacy = read_float(file, p + "rope.scale_linear", 1.0f, 1e-6, 1e6);
  if (!legacy) return legacy.error();
  auto factor = read_float(file, p + "rope.scaling.factor", *legacy, 1e-6, 1e6);
  if (!factor) return factor.error();
  if (!(*factor > 0.0f) || !std::isfinite(*factor)) {
    return make_error("{}: metadata '{}rope.scaling.factor' = {} is not a positive number", file.name(), p, *factor);
  }
  if (kind == "none" && *factor != 1.0f) {
    return make_error("{}: metadata '{}rope.scaling.type' is 'none' but '{}rope.scaling.factor' is {}", file.name(), p,
                      p, *factor);
  }
  auto attn_factor = read_float(file, p + "rope.scaling.attn_factor", 1.0f, 0.0, 1e6);
  if (!attn_factor) return attn_factor.error();
  if (*attn_factor != 1.0f && c.architecture != "phi3") {
    return make_error("{}: metadata '{}rope.scaling.attn_factor' = {} is not supported (only 1, or phi3's LongRoPE)",
                      file.name(), p, *attn_factor);
  }
  if (!(*attn_factor > 0.0f)) {
    return make_error("{}: metadata '{}rope.scaling.attn_factor' = {} is not a positive number", file.name(), p,
                      *attn_factor);
  }
  auto original = read_positive(file, p + "rope.scaling.original_context_length", c.n_ctx_train);
  if (!original) return original.error();
  c.rope_freq_scale = 1.0f / *factor;
  c.rope_attn_factor = *attn_factor;
  c.rope_original_context = *original;
  return {};
}

// phi3's attention.sliding_window: as llama.cpp b4748's build_phi3, every layer masks keys older than the window
// (absent: no window, as Phi-4). Window slabs keep what the window reads (kv/kv_cache_manager.h); the context is
// not capped. gpt-oss: the window is required and applies to even layers (llama.cpp's swa pattern 2); a separate
// rope.freq_base_swa is refused (gpt-oss has none; it would rotate the local layers differently).
Result<void> read_sliding_window(const GgufFile& file, const std::string& p, ModelConfig& c) {
  if (c.architecture == "gpt-oss") {
    auto window = read_positive(file, p + "attention.sliding_window", std::nullopt);
    if (!window) return window.error();
    auto base_swa = file.get_float(p + "rope.freq_base_swa");
    if (!base_swa) return base_swa.error();
    if (base_swa->has_value() && static_cast<float>(**base_swa) != c.rope_freq_base) {
      return make_error("{}: metadata '{}rope.freq_base_swa' = {} differs from rope.freq_base, which Hearth does not "
                        "support for gpt-oss",
                        file.name(), p, **base_swa);
    }
    c.sliding_window = *window;
    c.swa_period = 2;
    return {};
  }
  if (c.architecture != "phi3") return {};
  auto window = read_positive(file, p + "attention.sliding_window", 0);  // 0: absent
  if (!window) return window.error();
  c.sliding_window = *window;
  c.swa_period = 1;
  return {};
}

Result<std::vector<int32_t>> read_per_layer(const GgufFile& file, const std::string& key, int32_t n_layers,
                                            std::optional<int32_t> fallback, int32_t min_value);

// gemma4's feed_forward_length and attention.head_count_kv: one number or one per layer (the double-wide MLP of
// the shared-KV layers, fewer KV heads on global layers). ffn_dim and n_kv_heads become the largest.
Result<void> read_gemma4_per_layer(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto ffn = read_per_layer(file, p + "feed_forward_length", c.n_layers, std::nullopt, 1);
  if (!ffn) return ffn.error();
  auto kv_heads = read_per_layer(file, p + "attention.head_count_kv", c.n_layers, c.n_heads, 1);
  if (!kv_heads) return kv_heads.error();
  for (int32_t il = 0; il < c.n_layers; ++il) {
    if (c.n_heads % (*kv_heads)[il] != 0) {
      return make_error("{}: head_count {} is not a multiple of layer {}'s head_count_kv {}", file.name(), c.n_heads,
                        il, (*kv_heads)[il]);
    }
  }
  c.ffn_dim = *std::max_element(ffn->begin(), ffn->end());
  c.n_kv_heads = *std::max_element(kv_heads->begin(), kv_heads->end());
  c.layer_ffn_dim = std::move(*ffn);
  c.layer_kv_heads = std::move(*kv_heads);
  return {};
}

Result<void> read_gemma4(const GgufFile& file, const std::string& p, ModelConfig& c);

// gemma4's mixture of experts (26B-A4B), when expert_count > 0: every layer's dense FFN is then a shared expert
// beside expert_used_count of expert_count experts of expert_feed_forward_length, routed by a softmax over all of
// them, the weights of the chosen normalised to sum 1 (llama.cpp's build_moe_ffn with norm_w), GELU-gated.
Result<void> read_gemma4_moe(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto experts = file.get_uint(p + "expert_count");
  if (!experts) return experts.error();
  if (experts->value_or(0) == 0) return {};
  auto n_expert = read_positive(file, p + "expert_count", std::nullopt);
  if (!n_expert) return n_expert.error();
  auto n_used = read_positive(file, p + "expert_used_count", std::nullopt);
  if (!n_used) return n_used.error();
  if (*n_expert > kMaxExperts || *n_used > *n_expert) {
    return make_error("{}: {}expert_used_count {} and expert_count {} need 1 <= used <= count <= {}", file.name(), p,
                      *n_used, *n_expert, kMaxExperts);
  }
  auto expert_ffn = read_positive(file, p + "expert_feed_forward_length", std::nullopt);
  if (!expert_ffn) return expert_ffn.error();
  c.moe = MoeRouting{
      *n_expert, *n_used, *expert_ffn, ExpertGating::kSoftmax, /*norm_weights=*/true, ExpertActivation::kGelu};
  return {};
}

// Gemma 2 and 3, as llama.cpp reads them (llama-model.cpp's load_hparams and build_gemma2/3): the window is applied
// as a mask on local layers, so the context is not capped; soft-capping defaults are llama.cpp's.
Result<void> read_gemma(const GgufFile& file, const std::string& p, ModelConfig& c) {
  if (!c.gemma) return {};
  if (c.gemma4) return read_gemma4(file, p, c);
  const bool gemma2 = c.architecture == "gemma2";
  auto window =
      read_positive(file, p + "attention.sliding_window", gemma2 ? std::optional<int32_t>(4096) : std::nullopt);
  if (!window) return window.error();
  c.sliding_window = *window;
  c.swa_period = gemma2 ? 2 : 6;
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.dim / c.n_heads : c.head_dim));
  if (gemma2) {
    auto attn_cap = read_float(file, p + "attn_logit_softcapping", 50.0f, 0.0, 1e6);
    if (!attn_cap) return attn_cap.error();
    auto final_cap = read_float(file, p + "final_logit_softcapping", 30.0f, 0.0, 1e6);
    if (!final_cap) return final_cap.error();
    c.attn_softcap = *attn_cap;
    c.final_softcap = *final_cap;
  } else {
    c.rope_freq_base_local = 10000.0f;
  }
  return {};
}

// A per-layer hyperparameter stored as one number or as an array of one per layer (llama.cpp's get_key_or_arr).
// Absent: `fallback` everywhere. Every value must be in [min_value, 2^30].
Result<std::vector<int32_t>> read_per_layer(const GgufFile& file, const std::string& key, int32_t n_layers,
                                            std::optional<int32_t> fallback, int32_t min_value) {
  const GgufValue* v = file.find(key);
  std::vector<int32_t> out;
  if (v != nullptr && v->type == GgufType::ARRAY) {
    auto items = file.get_int_array(key);
    if (!items) return items.error();
    if (static_cast<int32_t>(items->size()) != n_layers) {
      return make_error("{}: metadata '{}' has {} values for {} layers", file.name(), key, items->size(), n_layers);
    }
    for (int64_t x : *items) {
      if (x < min_value || x > (int64_t{1} << 30)) {
        return make_error("{}: metadata '{}' holds {}, out of range", file.name(), key, x);
      }
      out.push_back(static_cast<int32_t>(x));
    }
    return out;
  }
  auto one = read_positive(file, key, fallback);
  if (!one) return one.error();
  return std::vector<int32_t>(static_cast<size_t>(n_layers), *one);
}

// attention.sliding_window_pattern (and attention.recurrent_layers): one bool (or integer) per layer, true where the
// layer slides (is recurrent).
Result<std::vector<bool>> read_swa_pattern(const GgufFile& file, const std::string& key, int32_t n_layers) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return make_error("{}: missing metadata key '{}'", file.name(), key);
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&v->data);
  if (v->type != GgufType::ARRAY || array == nullptr || static_cast<int32_t>((*array)->items.size()) != n_layers) {
    return make_error("{}: metadata '{}' must be an array of one bool per layer ({})", file.name(), key, n_layers);
  }
  std::vector<bool> out;
  for (const GgufValue& item : (*array)->items) {
    if (const bool* b = std::get_if<bool>(&item.data)) {
      out.push_back(*b);
    } else if (const uint64_t* u = std::get_if<uint64_t>(&item.data)) {
      out.push_back(*u != 0);
    } else {
      return make_error("{}: metadata '{}' must be an array of bools", file.name(), key);
    }
  }
  return out;
}

// Gemma 4's keys beyond the shared ones, as llama.cpp's llama_model_gemma4::load_arch_hparams reads them
// (config.h's header says what each does). What Hearth does not compute is refused by name.
Result<void> read_gemma4(const GgufFile& file, const std::string& p, ModelConfig& c) {
  HEARTH_TRY(read_gemma4_moe(file, p, c));
  auto window = read_positive(file, p + "attention.sliding_window", std::nullopt);
  if (!window) return window.error();
  c.sliding_window = *window;
  auto pattern = read_swa_pattern(file, p + "attention.sliding_window_pattern", c.n_layers);
  if (!pattern) return pattern.error();
  c.swa_layers = std::move(*pattern);
  auto key_swa = read_positive(file, p + "attention.key_length_swa", std::nullopt);
  if (!key_swa) return key_swa.error();
  auto value_swa = read_positive(file, p + "attention.value_length_swa", std::nullopt);
  if (!value_swa) return value_swa.error();
  if (*value_swa != *key_swa || *key_swa > (1 << 14)) {
    return make_error("{}: attention.value_length_swa {} must equal attention.key_length_swa {} (at most 16384)",
                      file.name(), *value_swa, *key_swa);
  }
  c.head_dim_local = *key_swa;
  auto rope_swa = read_positive(file, p + "rope.dimension_count_swa", c.head_dim_local);
  if (!rope_swa) return rope_swa.error();
  if (*rope_swa > c.head_dim_local || *rope_swa % 2 != 0) {
    return make_error("{}: rope.dimension_count_swa {} is invalid for head size {}", file.name(), *rope_swa,
                      c.head_dim_local);
  }
  c.rope_dim_local = *rope_swa;
  auto base_swa = read_float(file, p + "rope.freq_base_swa", 10000.0f, 0.0, 1e12);
  if (!base_swa) return base_swa.error();
  c.rope_freq_base_local = *base_swa;
  auto shared = file.get_uint(p + "attention.shared_kv_layers");
  if (!shared) return shared.error();
  const uint64_t n_shared = shared->value_or(0);
  if (n_shared > 0 && (n_shared + 2 > static_cast<uint64_t>(c.n_layers))) {
    return make_error("{}: attention.shared_kv_layers {} leaves fewer than 2 of {} layers with K/V", file.name(),
                      n_shared, c.n_layers);
  }
  c.n_kv_shared_layers = static_cast<int32_t>(n_shared);
  for (int32_t il = c.n_layers - c.n_kv_shared_layers; il < c.n_layers; ++il) {
    const int32_t source = c.kv_layer_of(il);
    if (c.is_local(source) != c.is_local(il)) {
      return make_error(
          "{}: shared-KV layer {} ({}) would read layer {} of the other kind, which llama.cpp's gemma4 "
          "does too but Hearth does not support",
          file.name(), il, c.is_local(il) ? "sliding" : "global", source);
    }
  }
  auto per_layer = file.get_uint(p + "embedding_length_per_layer_input");
  if (!per_layer) return per_layer.error();
  if (!per_layer->has_value()) {
    return make_error("{}: missing metadata key '{}embedding_length_per_layer_input'", file.name(), p);
  }
  if (**per_layer > (1u << 16)) return make_error("{}: embedding_length_per_layer_input is out of range", file.name());
  c.per_layer_dim = static_cast<int32_t>(**per_layer);
  auto final_cap = file.get_float(p + "final_logit_softcapping");
  if (!final_cap) return final_cap.error();
  if (final_cap->has_value()) {
    auto cap = read_float(file, p + "final_logit_softcapping", 0.0f, 0.0, 1e6);
    if (!cap) return cap.error();
    c.final_softcap = *cap;
  }
  c.attn_scale = 1.0f;  // llama.cpp's gemma4: f_attention_scale 1 (q and k are RMS-normed)
  c.value_norm = true;
  return {};
}

// qwen3moe's experts, as llama.cpp's qwen3moe loader reads them: expert_count and expert_used_count required,
// expert_feed_forward_length or else feed_forward_length / expert_used_count. `ffn` is feed_forward_length, 0
// when absent (a MoE file needs it only for the fallbacks). qwen35moe adds its shared expert's width,
// expert_shared_feed_forward_length or else feed_forward_length, as llama.cpp's qwen35moe loader (qwen3next too).
Result<void> read_moe(const GgufFile& file, const std::string& p, int32_t ffn, ModelConfig& c) {
  const bool gpt_oss = c.architecture == "gpt-oss";
  const bool qwen35moe = c.architecture == "qwen35moe" || c.architecture == "qwen3next";
  if (c.architecture != "qwen3moe" && !qwen35moe && !gpt_oss) return {};
  auto n_expert = read_positive(file, p + "expert_count", std::nullopt);
  if (!n_expert) return n_expert.error();
  auto n_used = read_positive(file, p + "expert_used_count", std::nullopt);
  if (!n_used) return n_used.error();
  if (*n_expert > kMaxExperts || *n_used > *n_expert) {
    return make_error("{}: {}expert_used_count {} and expert_count {} need 1 <= used <= count <= {}", file.name(), p,
                      *n_used, *n_expert, kMaxExperts);
  }
  const std::optional<int32_t> fallback = ffn / *n_used > 0 ? std::optional<int32_t>(ffn / *n_used) : std::nullopt;
  auto expert_ffn = read_positive(file, p + "expert_feed_forward_length", fallback);
  if (!expert_ffn) return expert_ffn.error();
  if (gpt_oss) {
    // llama.cpp's gpt-oss: the largest logits, a softmax over them, no renormalisation, biases, the clamped SwiGLU.
    c.moe = MoeRouting{*n_expert,      *n_used, *expert_ffn, ExpertGating::kSoftmaxWeight, /*norm_weights=*/false,
                       ExpertActivation::kSwigluOai, /*biases=*/true};
    return {};
  }
  c.moe = MoeRouting{*n_expert, *n_used, *expert_ffn, ExpertGating::kSoftmax, /*norm_weights=*/true};
  if (!qwen35moe) return {};
  auto shared_ffn = read_positive(file, p + "expert_shared_feed_forward_length",
                                  ffn > 0 ? std::optional<int32_t>(ffn) : std::nullopt);
  if (!shared_ffn) return shared_ffn.error();
  c.moe.shared_ffn_dim = *shared_ffn;
  return {};
}

// qwen35's rope.dimension_sections: llama.cpp rotates pair p (of rope_dim / 2) by the position of its interleaved
// M-RoPE section (ggml's imrope: sector p % Σsections is t when ≡ 0 mod 3 and < 3 s0, h when ≡ 1 and < 3 s1, w when
// ≡ 2 and < 3 s2, else the fourth position, 0 for text). Text gives t, h and w the token's position, so when every
// pair falls in t, h or w the rotation is plain neox RoPE; a pair left to the fourth would not turn at all.
Result<void> check_rope_sections(const GgufFile& file, const std::string& p, const ModelConfig& c) {
  auto sections = file.get_int_array(p + "rope.dimension_sections");
  if (!sections) return sections.error();
  if (sections->empty()) return {};  // absent: plain neox
  std::array<int64_t, 4> s{};
  for (size_t i = 0; i < std::min<size_t>(4, sections->size()); ++i) s[i] = (*sections)[i];
  const int64_t total = s[0] + s[1] + s[2] + s[3];
  if (total <= 0 || s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0) {
    return make_error("{}: metadata '{}rope.dimension_sections' is invalid", file.name(), p);
  }
  for (int64_t pair = 0; pair < c.rope_dim / 2; ++pair) {
    const int64_t sector = pair % total;
    const bool text = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                      (sector % 3 == 2 && sector < 3 * s[2]);
    if (!text) {
      return make_error(
          "{}: metadata '{}rope.dimension_sections' = [{}, {}, {}, {}] leaves rotated pair {} to the fourth "
          "(non-text) M-RoPE section, which Hearth does not support",
          file.name(), p, s[0], s[1], s[2], s[3], pair);
    }
  }
  return {};
}

// <arch>.nextn_predict_layers: the multi-token-prediction (MTP) blocks that Qwen3.5/3.6 and Qwen3-Next files keep
// after the trunk. As in llama.cpp (llama_hparams::n_layer() = block_count − nextn_predict_layers; the qwen35,
// qwen35moe and qwen3next loaders put the MTP blocks at blk.n_layer … blk.block_count−1 and their graphs run only
// the first n_layer), block_count counts them and n_layers becomes the layers that run. Their tensors are bound to
// nothing (model/weights.cpp) and no KV, state or plan counts them. Other architectures' MTP layouts are refused:
// Hearth knows of none whose trunk it could run without guessing.
Result<void> read_nextn(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto nextn = file.get_uint(p + "nextn_predict_layers");
  if (!nextn) return nextn.error();
  if (!nextn->has_value() || **nextn == 0) return {};
  const std::string& a = c.architecture;
  if (a != "qwen35" && a != "qwen35moe" && a != "qwen3next") {
    return make_error(
        "{}: metadata '{}nextn_predict_layers' = {}: multi-token-prediction layers are supported for "
        "qwen35, qwen35moe and qwen3next only",
        file.name(), p, **nextn);
  }
  if (**nextn >= static_cast<uint64_t>(c.n_layers)) {
    return make_error(
        "{}: metadata '{}nextn_predict_layers' = {} leaves none of block_count {} to run (a file of "
        "multi-token-prediction layers alone is a draft head, not a model Hearth serves)",
        file.name(), p, **nextn, c.n_layers);
  }
  c.n_nextn_layers = static_cast<int32_t>(**nextn);
  c.n_layers -= c.n_nextn_layers;
  return {};
}

// attention.recurrent_layers: llama.cpp's converter writes it from the checkpoint's layer_types, one bool per block
// with the MTP blocks false (llama.cpp's loaders read it before full_attention_interval). Hearth's layers follow the
// interval (ModelConfig::is_recurrent), so a list is accepted only where it says the same of every block; any other
// pattern is refused naming the first block where they part.
Result<void> check_recurrent_layers(const GgufFile& file, const std::string& p, const ModelConfig& c) {
  const std::string key = p + "attention.recurrent_layers";
  if (file.find(key) == nullptr) return {};
  const int32_t n_blocks = c.n_layers + c.n_nextn_layers;
  auto recurrent = read_swa_pattern(file, key, n_blocks);
  if (!recurrent) return recurrent.error();
  for (int32_t il = 0; il < n_blocks; ++il) {
    const bool interval_says = il < c.n_layers && c.is_recurrent(il);
    if ((*recurrent)[il] != interval_says) {
      return make_error(
          "{}: metadata '{}' marks block {} {} where full_attention_interval {} makes it {}: Hearth "
          "supports only the interval's pattern",
          file.name(), key, il, (*recurrent)[il] ? "recurrent" : "attention", c.delta_net.full_attention_interval,
          il >= c.n_layers ? "a multi-token-prediction block (attention)"
                           : (interval_says ? "recurrent" : "attention"));
    }
  }
  return {};
}

// qwen35, qwen35moe and qwen3next: the Gated DeltaNet layers' ssm.* keys (all required, as llama.cpp's loader
// requires them) and full_attention_interval (default 4) over the layers that run (read_nextn has taken the
// multi-token-prediction blocks off n_layers). attention.recurrent_layers (an explicit per-block list) must agree
// with the interval.
Result<void> read_delta_net(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const bool qwen3next = c.architecture == "qwen3next";
  if (c.architecture != "qwen35" && c.architecture != "qwen35moe" && !qwen3next) return {};
  DeltaNetConfig& d = c.delta_net;
  auto conv = read_positive(file, p + "ssm.conv_kernel", std::nullopt);
  auto state = read_positive(file, p + "ssm.state_size", std::nullopt);
  auto groups = read_positive(file, p + "ssm.group_count", std::nullopt);
  auto rank = read_positive(file, p + "ssm.time_step_rank", std::nullopt);
  auto inner = read_positive(file, p + "ssm.inner_size", std::nullopt);
  auto interval = read_positive(file, p + "full_attention_interval", 4);
  for (const auto* r : {&conv, &state, &groups, &rank, &inner, &interval}) {
    if (!*r) return r->error();
  }
  if (*conv > 64 || *state > 1024 || *rank > 1024 || *groups > *rank || *rank % *groups != 0) {
    return make_error("{}: {}ssm.* = conv_kernel {}, state_size {}, group_count {}, time_step_rank {}: unsupported "
                      "(conv_kernel <= 64, state_size <= 1024, time_step_rank a multiple of group_count)",
                      file.name(), p, *conv, *state, *groups, *rank);
  }
  if (int64_t{*rank} * *state != *inner) {
    return make_error("{}: {}ssm.inner_size {} is not time_step_rank {} × state_size {}", file.name(), p, *inner,
                      *rank, *state);
  }
  d = DeltaNetConfig{*conv, *state, *groups, *rank, *interval, /*grouped_heads=*/qwen3next};
  c.attn_output_gate = true;
  HEARTH_TRY(check_recurrent_layers(file, p, c));
  if (c.n_kv_layers() == 0) {
    return make_error("{}: {}full_attention_interval {} leaves none of the {} layers attending, which Hearth does not "
                      "support",
                      file.name(), p, *interval, c.n_layers);
  }
  return check_rope_sections(file, p, c);
}

}  // namespace

int32_t ModelConfig::max_kv_heads() const {
  int32_t most = n_kv_heads;
  for (int32_t h : layer_kv_heads) most = std::max(most, h);
  return most;
}

int32_t ModelConfig::max_ffn_dim() const {
  int32_t most = ffn_dim;
  for (int32_t f : layer_ffn_dim) most = std::max(most, f);
  return most;
}

int32_t ModelConfig::max_kv_dim() const {
  int32_t most = 0;
  for (int32_t il = 0; il < n_layers; ++il) most = std::max(most, kv_dim_of(il));
  return most;
}

// One plane per layer that stores K/V (has_kv): a hybrid's attention layers only, gemma4's layers before its
// shared-KV ones, each with its own heads and head size where layers differ (gemma4), else uniform.
KvShape ModelConfig::kv_shape() const {
  KvShape shape{n_kv_layers(), n_kv_heads, head_dim};
  if (!gemma4) return shape;
  shape.head_dim = max_head_dim();
  shape.n_kv_heads = max_kv_heads();
  for (int32_t il = 0; il < n_layers; ++il) {
    if (has_kv(il)) shape.layers.push_back({kv_heads_of(il), head_dim_of(il)});
  }
  return shape;
}

std::string ModelConfig::supported_architectures() {
  std::string list;
  for (auto a : kSupportedArchitectures) {
    if (!list.empty()) list += ", ";
    list += a;
  }
  return list;
}

namespace {

// bert and nomic-bert (config.h's header): LayerNorm epsilon, the token type count, the attention's non-causality.
Result<void> read_encoder(const GgufFile& file, const std::string& p, ModelConfig& c) {
  c.encoder = c.architecture == "bert" || c.architecture == "nomic-bert";
  if (!c.encoder) return {};
  auto eps = read_float(file, p + "attention.layer_norm_epsilon", 1e-12f, 0.0, 1.0);
  if (!eps) return eps.error();
  auto types = file.get_uint("tokenizer.ggml.token_type_count");
  if (!types) return types.error();
  if (!types->has_value() || **types == 0 || **types > 1024) {
    return make_error("{}: {} needs tokenizer.ggml.token_type_count (1 to 1024), as llama.cpp does", file.name(),
                      c.architecture);
  }
  auto causal = file.get_bool(p + "attention.causal");
  if (!causal) return causal.error();
  if (causal->has_value() && **causal) {
    return make_error("{}: metadata '{}attention.causal' = true: Hearth runs {} with bidirectional attention only",
                      file.name(), p, c.architecture);
  }
  c.norm_eps = *eps;
  c.n_token_types = static_cast<int32_t>(**types);
  if (c.architecture == "bert") c.rope_dim = 0;  // learned absolute positions instead
  c.rope_style = RopeStyle::kNeox;
  return {};
}

// <arch>.pooling_type, llama.cpp's numbers (pooling.h); absent: none.
Result<void> read_pooling(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto value = file.get_uint(p + "pooling_type");
  if (!value) return value.error();
  if (!value->has_value()) return {};
  if (**value > static_cast<uint64_t>(PoolingType::kRank)) {
    return make_error("{}: {}pooling_type {} is not one of 0 (none) to 4 (rank)", file.name(), p, **value);
  }
  c.pooling = static_cast<PoolingType>(**value);
  return {};
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const GgufFile& file) {
  ModelConfig c;
  auto arch = file.get_string("general.architecture");
  if (!arch) return arch.error();
  if (!arch->has_value()) return make_error("{}: missing metadata key 'general.architecture'", file.name());
  c.architecture = **arch;
  bool supported = false;
  for (auto a : kSupportedArchitectures) supported |= (a == c.architecture);
  if (!supported) {
    return make_error("{}: architecture '{}' is not supported (supported: {})", file.name(), c.architecture,
                      supported_architectures());
  }
  auto name = file.get_string("general.name");
  if (name && name->has_value()) c.name = **name;

  const std::string p = c.architecture + ".";
  auto dim = read_positive(file, p + "embedding_length", std::nullopt);
  auto layers = read_positive(file, p + "block_count", std::nullopt);
  auto heads = read_positive(file, p + "attention.head_count", std::nullopt);
  // A MoE file's feed_forward_length is only the fallback for its experts' width (read_moe).
  const bool moe = c.architecture == "qwen3moe" || c.architecture == "qwen35moe" || c.architecture == "qwen3next" ||
                   c.architecture == "gpt-oss";
  c.gemma4 = c.architecture == "gemma4";
  auto ffn = c.gemma4 ? Result<int32_t>(0)
                      : read_positive(file, p + "feed_forward_length", moe ? std::optional<int32_t>(0) : std::nullopt);
  auto ctx = read_positive(file, p + "context_length", 2048);
  for (const auto* r : {&dim, &layers, &heads, &ffn, &ctx}) {
    if (!*r) return r->error();
  }
  c.dim = *dim;
  c.n_layers = *layers;
  HEARTH_TRY(read_nextn(file, p, c));
  c.n_heads = *heads;
  c.ffn_dim = *ffn;
  c.n_ctx_train = *ctx;
  if (c.gemma4) HEARTH_TRY(read_gemma4_per_layer(file, p, c));
  auto kv_heads =
      c.gemma4 ? Result<int32_t>(c.n_kv_heads) : read_positive(file, p + "attention.head_count_kv", c.n_heads);
  if (!kv_heads) return kv_heads.error();
  c.n_kv_heads = *kv_heads;
  if (c.n_heads % c.n_kv_heads != 0) {
    return make_error("{}: head_count {} is not a multiple of head_count_kv {}", file.name(), c.n_heads, c.n_kv_heads);
  }
  auto key_len = read_positive(file, p + "attention.key_length", 0);  // 0: absent
  if (!key_len) return key_len.error();
  if (*key_len == 0 && c.dim % c.n_heads != 0) {
    return make_error("{}: embedding_length {} is not divisible by head_count {} (and no attention.key_length)",
                      file.name(), c.dim, c.n_heads);
  }
  c.head_dim = *key_len != 0 ? *key_len : c.dim / c.n_heads;
  auto value_len = read_positive(file, p + "attention.value_length", c.head_dim);
  if (!value_len) return value_len.error();
  if (*value_len != c.head_dim) {
    return make_error(
        "{}: attention.value_length {} differs from attention.key_length {}, which Hearth does not "
        "support",
        file.name(), *value_len, c.head_dim);
  }
  auto rope_dim = read_positive(file, p + "rope.dimension_count", c.head_dim);
  if (!rope_dim) return rope_dim.error();
  c.rope_dim = *rope_dim;
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return make_error("{}: rope.dimension_count {} is invalid for head size {}", file.name(), c.rope_dim, c.head_dim);
  }
  HEARTH_TRY(read_moe(file, p, c.ffn_dim, c));
  HEARTH_TRY(check_shape_limits(file, c));
  auto base = read_float(file, p + "rope.freq_base", 10000.0f, 0.0, 1e12);
  auto eps = read_float(file, p + "attention.layer_norm_rms_epsilon", 1e-5f, 0.0, 1.0);
  if (!base) return base.error();
  if (!eps) return eps.error();
  c.rope_freq_base = *base;
  c.rms_eps = *eps;
  const std::string& a = c.architecture;
  c.gemma = a == "gemma2" || a == "gemma3" || c.gemma4;
  const bool qwen3 = a == "qwen3" || a == "qwen3moe" || a == "qwen35" || a == "qwen35moe" || a == "qwen3next";
  const bool gpt_oss = a == "gpt-oss";
  const bool neox = a == "qwen2" || qwen3 || a == "phi3" || c.gemma || gpt_oss;
  c.attn_sinks = gpt_oss;
  c.attn_out_bias = gpt_oss;
  c.rope_style = neox ? RopeStyle::kNeox : RopeStyle::kNormal;
  c.qkv_bias_required = a == "qwen2";
  c.qk_norm = qwen3 || a == "gemma3" || c.gemma4;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.fused_qkv_ffn = a == "phi3";
  c.rope_freqs_allowed = a == "llama" || a == "mistral" || a == "smollm";
  c.rope_factors_allowed = a == "phi3";
  HEARTH_TRY(read_rope_scaling(file, p, c));
  HEARTH_TRY(read_sliding_window(file, p, c));
  HEARTH_TRY(read_gemma(file, p, c));
  HEARTH_TRY(read_delta_net(file, p, c));
  HEARTH_TRY(read_pooling(file, p, c));
  HEARTH_TRY(read_encoder(file, p, c));

  const GgufTensor* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("{}: missing tensor 'token_embd.weight'", file.name());
  if (embd->ne[0] != c.dim || embd->ne[1] <= 0 || embd->ne[1] > (1 << 24)) {
    return make_error("{}: token_embd.weight has shape [{}, {}], expected [{}, n_vocab]", file.name(), embd->ne[0],
                      embd->ne[1], c.dim);
  }
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return c;
}

}  // namespace hearth

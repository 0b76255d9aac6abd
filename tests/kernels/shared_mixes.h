#pragma once
// The real quantization mixes in ../shared/models/mixes/: synth-tiny-f16.gguf quantized by llama.cpp's
// llama-quantize into the mixes people download, each beside gguf-py's dequantization of every tensor as the
// SHA-256 of its float32 values (`synth-tiny-MIX.dequant.json`, see that folder's README). Data files only: no
// peer program runs at test time.

#include <set>
#include <string>

#include "tensor/dtype.h"

namespace hearth::mixes {

inline const std::string kDir = std::string(HEARTH_SHARED_DIR) + "/models/mixes";

struct Mix {
  const char* name;                // llama-quantize's name, lower case as in the file names
  std::set<DType> expected_types;  // the quantized types the mix must contain (each is checked)
};

inline const Mix kMixes[] = {
    {"q4_k_m", {DType::Q4_K, DType::Q6_K}},
    {"q5_k_m", {DType::Q5_K, DType::Q6_K}},
    {"q3_k_m", {DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}},
    {"iq4_xs", {DType::IQ4_XS, DType::Q6_K}},
    {"q5_0", {DType::Q5_0}},
    {"q5_1", {DType::Q5_1}},
    {"q4_1", {DType::Q4_1}},
    {"iq4_nl", {DType::IQ4_NL}},
    {"q2_k", {DType::Q2_K, DType::Q3_K}},
    {"q8_0", {DType::Q8_0}},
    {"q4_0", {DType::Q4_0}},
    {"q6_k", {DType::Q6_K}},
    {"bf16", {DType::BF16}},
};

inline std::string gguf_path(const Mix& mix) { return kDir + "/synth-tiny-" + mix.name + ".gguf"; }
inline std::string dequant_path(const Mix& mix) { return kDir + "/synth-tiny-" + mix.name + ".dequant.json"; }

}  // namespace hearth::mixes

#pragma once
// The tiny hybrid models the hybrid tests share (hybrid_cache_test.cpp, qwen35moe_test.cpp, qwen3next_test.cpp):
// one shape written as each hybrid family (qwen35, qwen35moe, qwen3next), Qwen's vocabulary, and the checks every
// family passes alike.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tensor/dtype.h"

namespace hearth::test {

// A hybrid family, as a value-parameterized test names it.
struct HybridFamily {
  const char* name;          // the test name's suffix: "Qwen35Moe"
  const char* architecture;  // the synthetic file's general.architecture: "qwen35moe"
};
inline constexpr HybridFamily kHybridFamilies[] = {
    {"Qwen35", "qwen35"}, {"Qwen35Moe", "qwen35moe"}, {"Qwen3Next", "qwen3next"}};
// gtest prints a parameter with this (ctest's listing, a failure's message).
inline void PrintTo(const HybridFamily& family, std::ostream* os) {
  *os << family.architecture;
}

// arch_test's tiny qwen35: dim 64, 4 layers (0-2 Gated DeltaNet, 3 gated attention), 4 heads of 32, 2 KV heads,
// DeltaNet heads of 32 (2 key, 4 value heads: grouped and tiled key heads differ), weights of sd 0.1, Qwen's
// vocabulary. qwen35's FFN is dense (128); qwen35moe's and qwen3next's a mixture of 8 experts of 32, 2 used, with a
// router of sd 0.5 (each top-2 decided far above rounding) and a shared expert of 64. Q8_0 reads the experts and
// the shared expert through the packed tiles where the CPU has AVX2. Another seed makes another model (another
// fingerprint) of the same shape. nextn_layers > 0 adds that many multi-token-prediction blocks after the 4 layers
// (synth.h): every other tensor has the same bytes. Written once per process, removed at its exit; returns the
// file's path.
const std::string& hybrid_model(const std::string& architecture, DType weight_type = DType::F32, uint64_t seed = 7,
                                int64_t nextn_layers = 0);

[[nodiscard]] std::shared_ptr<const GgufFile> open_file(const std::string& path);

// n token ids of Qwen's vocabulary; another seed, another sequence.
std::vector<int32_t> sample_tokens(int32_t n, int32_t seed);

// The same floats, bit for bit; `what` names the comparison in a failure.
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what);

// The logits and the recurrent state after 60 tokens have the same bits whether the tokens came one at a time
// (each expert read for one row) or in chunks of 7 or one 60-row prefill (rows grouped by expert, the shared expert
// over the whole batch).
void expect_same_bits_whatever_the_chunking(const std::string& architecture, DType weight_type);

}  // namespace hearth::test

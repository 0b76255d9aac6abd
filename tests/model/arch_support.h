#pragma once
// Helpers of the architecture tests (arch_test.cpp, qwen35moe_test.cpp): the engine's logits token by token, their
// distance to a reference, and greedy continuations of one prompt by Hearth and by the peer (llama.cpp v0.5.0 as
// the npm package node-llama-cpp 3.22.1 ships it: bench/peer/greedy.mjs, installed by scripts/test.sh). A target
// that compiles this needs HEARTH_PEER_DIR (tests/model/CMakeLists.txt).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace hearth::test {

// The engine's logits after every token, one token per forward call, f32 KV: [tokens.size()][n_vocab].
std::vector<std::vector<float>> engine_logits(const std::shared_ptr<const GgufFile>& file,
                                              const std::vector<int32_t>& tokens);

// Largest |a - b| over every position and vocabulary entry, relative to the largest |b|.
double max_relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b);

inline constexpr const char* kPeerPrompt = "Once upon a time";
inline constexpr int kPeerGreedyTokens = 32;

struct Greedy {
  std::vector<int32_t> prompt_ids;  // plain ints, so a mismatch prints the ids
  std::vector<int32_t> ids;
  std::string text;
};

// Hearth's greedy continuation of kPeerPrompt: exactly kPeerGreedyTokens tokens (an end-of-generation token is
// generated like any other, as the peer program does), f16 KV as the peer's default. Empty, with the reason as a
// test failure, when the model does not load.
Greedy hearth_greedy(const std::string& path);

// The peer's greedy continuation of kPeerPrompt (one thread, a 256-token context). Its absence is a test failure,
// never a skip; so is output that is not its JSON (stderr goes to path + ".peer.log").
Greedy peer_greedy(const std::string& path);

// Token ids first (the prompt's, then the generated ones), text second.
void expect_greedy_matches_peer(const std::string& path, const std::string& what);

}  // namespace hearth::test

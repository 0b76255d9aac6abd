#pragma once
// Helpers for tier tests: a fresh directory per test (and per process: ctest runs suites in parallel), and
// well-formed entries.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kv/tier_entry.h"

namespace hearth::testing {

inline std::filesystem::path fresh_tier_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(HEARTH_TEST_TMP_DIR) /
                                    fmt::format("tier-{}-{}-{}-{}", name, info->test_suite_name(), info->name(),
                                                ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Private, as the tier makes the directories it creates, so the tier does not warn of a loose mode at open.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  return dir;
}

// A chain of entries of `n` blocks of 4 tokens, in namespace `ns`, payloads of `payload_bytes` patterned by block.
struct TestChain {
  std::vector<TierEntryHeader> headers;
  std::vector<std::vector<uint8_t>> payloads;
};

inline TestChain make_chain(const BlockHash& ns, int n, size_t payload_bytes, int32_t first_token = 1,
                            const std::string& layout = "test-layout") {
  TestChain c;
  BlockHash parent = ns;
  for (int i = 0; i < n; ++i) {
    TierEntryHeader h;
    for (int t = 0; t < 4; ++t) h.tokens.push_back(TokenId{first_token + 4 * i + t});
    h.key = hash_block(parent, ns, h.tokens);
    h.parent_key = parent;
    h.ns = ns;
    h.depth = i;
    h.written_at_ms = 1;
    h.payload_bytes = payload_bytes;
    h.layout = layout;
    std::vector<uint8_t> payload(payload_bytes);
    for (size_t b = 0; b < payload_bytes; ++b) payload[b] = static_cast<uint8_t>(b * 31 + i * 7 + first_token);
    parent = h.key;
    c.headers.push_back(std::move(h));
    c.payloads.push_back(std::move(payload));
  }
  return c;
}

}  // namespace hearth::testing

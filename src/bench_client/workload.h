#pragma once
// The household workload: what a family's assistant sends. Every user shares one long, stable prefix (house
// rules, a tool catalogue in JSON-schema form, a household document) and then holds a private multi-turn chat.
// Everything is generated from a seed, so two runs with the same seed send the same text.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::bench {

// Token counts are estimated from text length: about 4 characters per token for English text with BPE
// vocabularies. The server's own count (usage.prompt_tokens) is what the report uses.
inline constexpr int kCharsPerTokenEstimate = 4;

// SplitMix64: a tiny generator whose output is the same on every platform and standard library (the
// <random> distributions are not), which is what makes a seeded workload reproducible.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, n); requires n > 0.
  uint64_t below(uint64_t n);
  // Uniform in [0, 1).
  double unit();
  // An exponential variate with the given rate (> 0): the gap between Poisson arrivals.
  double exponential(double rate);

 private:
  uint64_t state_;
};

struct WorkloadConfig {
  int users = 4;
  int turns = 3;
  int prefix_tokens = 2000;  // approximate size of the shared prefix
  int question_tokens = 16;  // approximate size of each new question
  uint64_t seed = 1;
};

struct SharedPrefix {
  std::string house_rules;
  std::string tool_catalogue;  // a JSON array of function tools with JSON-schema parameters
  std::string household_document;

  // The system message: the three parts under headings, after `nonce` (see Workload::system_message).
  [[nodiscard]] std::string text() const;
};

class Workload {
 public:
  explicit Workload(const WorkloadConfig& config);

  [[nodiscard]] const WorkloadConfig& config() const { return config_; }
  [[nodiscard]] const SharedPrefix& prefix() const { return prefix_; }

  // The system message every user sends. A non-empty `nonce` is written first ("Session <nonce>."), so a run
  // with a fresh nonce cannot reuse a cache that earlier runs left behind, while all users in one run still
  // share the whole prefix.
  [[nodiscard]] std::string system_message(const std::string& nonce) const;

  // The question `user` asks at `turn` (both from 0).
  [[nodiscard]] const std::string& question(int user, int turn) const { return questions_[user][turn]; }

 private:
  WorkloadConfig config_;
  SharedPrefix prefix_;
  std::vector<std::vector<std::string>> questions_;  // [user][turn]
};

// A user's conversation so far, as OpenAI chat messages.
class Conversation {
 public:
  Conversation(std::string system_message) : messages_(nlohmann::json::array()) {  // NOLINT
    messages_.push_back({{"role", "system"}, {"content", std::move(system_message)}});
  }
  void ask(const std::string& question) { messages_.push_back({{"role", "user"}, {"content", question}}); }
  void answer(const std::string& text) { messages_.push_back({{"role", "assistant"}, {"content", text}}); }
  [[nodiscard]] const nlohmann::json& messages() const { return messages_; }

 private:
  nlohmann::json messages_;
};

// Poisson arrival times in seconds from 0: `count` gaps drawn from Exp(rate) with a generator seeded by `seed`.
[[nodiscard]] std::vector<double> poisson_arrivals(int count, double rate, uint64_t seed);

}  // namespace hearth::bench

#pragma once
// ResponseStore: the responses of POST /v1/responses kept with "store": true, so GET /v1/responses/{id} returns
// them and a request with previous_response_id continues their conversation.
//
// A stored response keeps the conversation's exact token ids (its prompt's, then every id the model generated), so
// a follow-up's prompt is those ids, then the end of the answer's turn and the new input as the chat template renders
// them (responses.cpp): the answer is never re-tokenized, and the prefix cache serves the whole previous turn.
//
// Isolation: every entry belongs to the cache_salt of the request that made it, and only a request with the same
// salt finds it (another salt gets "not found", never "forbidden": an id tells nothing about another tenant).
// Bounds: at most max_entries responses holding at most max_bytes (ids, text and JSON); a response older than ttl
// is gone. The oldest go first; a response larger than max_bytes alone is not kept. Thread-safe.

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/ids.h"

namespace hearth::server {

struct StoredResponse {
  std::string id;
  std::string cache_salt;
  nlohmann::json response;  // the response object, as GET returns it
  // The conversation in the chat shape (chat.h), the answer's assistant message last (content, tool_calls with
  // their arguments as objects, reasoning_content), and what the template rendered with it.
  nlohmann::json messages;
  nlohmann::json tools;            // chat-shaped tools as rendered (null: none)
  nlohmann::json template_kwargs;  // extra template variables (null: none)
  std::optional<std::string> instructions;
  std::string answer_text;      // the answer as the model wrote it (its ids' text, control tokens spelled out)
  std::vector<TokenId> tokens;  // the prompt's ids, then the answer's
  size_t bytes() const;
};

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    size_t max_entries = 1024;  // 0: nothing is stored (store: true is then refused)
    size_t max_bytes = size_t{256} << 20;
    std::chrono::seconds ttl{3600};
  };

  explicit ResponseStore(Limits limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }

  // Keeps `response` (replacing one with the same id), dropping expired entries and then the oldest until the
  // limits hold. Returns false, keeping nothing, when the store is off or the response alone exceeds max_bytes.
  bool put(StoredResponse response, Clock::time_point now = Clock::now());

  // The response `id` of tenant `cache_salt`, when it is kept and not expired; nullptr otherwise.
  [[nodiscard]] std::shared_ptr<const StoredResponse> get(std::string_view cache_salt, std::string_view id,
                                                          Clock::time_point now = Clock::now());

  // Removes the response `id` of tenant `cache_salt`; false when there is none (or it expired, or it is another
  // tenant's).
  bool remove(std::string_view cache_salt, std::string_view id, Clock::time_point now = Clock::now());

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> response;
    size_t bytes = 0;
    Clock::time_point stored_at;
  };
  using List = std::list<Entry>;       // oldest first: expiry and eviction both take from the front
  void expire(Clock::time_point now);  // requires mutex_
  void erase(List::iterator it);       // requires mutex_

  const Limits limits_;
  mutable std::mutex mutex_;
  List entries_;
  std::unordered_map<std::string, List::iterator> by_id_;
  size_t bytes_ = 0;
};

}  // namespace hearth::server

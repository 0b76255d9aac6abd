#include "server/responses/response_store.h"

namespace hearth::server {

size_t StoredResponse::bytes() const {
  auto json_bytes = [](const nlohmann::json& j) {
    return j.is_null() ? size_t{0} : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  };
  return id.size() + cache_salt.size() + json_bytes(response) + json_bytes(messages) + json_bytes(tools) +
         json_bytes(template_kwargs) + (instructions ? instructions->size() : 0) + answer_text.size() +
         tokens.size() * sizeof(TokenId);
}

bool ResponseStore::put(StoredResponse response, Clock::time_point now) {
  if (limits_.max_entries == 0) return false;
  const size_t size = response.bytes();
  if (size > limits_.max_bytes) return false;
  std::lock_guard lock(mutex_);
  expire(now);
  if (auto it = by_id_.find(response.id); it != by_id_.end()) erase(it->second);
  const std::string id = response.id;
  entries_.push_back(Entry{std::make_shared<const StoredResponse>(std::move(response)), size, now});
  by_id_[id] = std::prev(entries_.end());
  bytes_ += size;
  while (entries_.size() > limits_.max_entries || bytes_ > limits_.max_bytes) erase(entries_.begin());
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(std::string_view cache_salt, std::string_view id,
                                                         Clock::time_point now) {
  std::lock_guard lock(mutex_);
  expire(now);
  auto it = by_id_.find(std::string(id));
  if (it == by_id_.end() || it->second->response->cache_salt != cache_salt) return nullptr;
  return it->second->response;
}

bool ResponseStore::remove(std::string_view cache_salt, std::string_view id, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  expire(now);
  auto it = by_id_.find(std::string(id));
  if (it == by_id_.end() || it->second->response->cache_salt != cache_salt) return false;
  erase(it->second);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void ResponseStore::expire(Clock::time_point now) {
  while (!entries_.empty() && now - entries_.front().stored_at >= limits_.ttl) erase(entries_.begin());
}

void ResponseStore::erase(List::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->response->id);
  entries_.erase(it);
}

}  // namespace hearth::server

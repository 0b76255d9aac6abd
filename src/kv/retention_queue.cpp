#include "kv/retention_queue.h"

#include <bit>

#include "util/result.h"

namespace hearth {

RetentionQueue::RetentionQueue(int32_t num_blocks) : links_(num_blocks) {
  head_.fill(-1);
  tail_.fill(-1);
}

void RetentionQueue::link_back(int32_t i, int32_t level) {
  Link& l = links_[i];
  l.level = level;
  l.next = -1;
  l.prev = tail_[level];
  if (tail_[level] >= 0)
    links_[tail_[level]].next = i;
  else
    head_[level] = i;
  tail_[level] = i;
  ++count_[level];
  nonempty_[level / 64] |= uint64_t{1} << (level % 64);
  ++size_;
}

void RetentionQueue::link_front(int32_t i, int32_t level) {
  Link& l = links_[i];
  l.level = level;
  l.prev = -1;
  l.next = head_[level];
  if (head_[level] >= 0)
    links_[head_[level]].prev = i;
  else
    tail_[level] = i;
  head_[level] = i;
  ++count_[level];
  nonempty_[level / 64] |= uint64_t{1} << (level % 64);
  ++size_;
}

void RetentionQueue::unlink(int32_t i) {
  Link& l = links_[i];
  const int32_t level = l.level;
  if (l.prev >= 0)
    links_[l.prev].next = l.next;
  else
    head_[level] = l.next;
  if (l.next >= 0)
    links_[l.next].prev = l.prev;
  else
    tail_[level] = l.prev;
  if (--count_[level] == 0) nonempty_[level / 64] &= ~(uint64_t{1} << (level % 64));
  l.prev = l.next = l.level = -1;
  --size_;
}

void RetentionQueue::push(int32_t i, bool has_key, uint8_t priority, int64_t expires_at, int64_t now) {
  HEARTH_CHECK(links_[i].level < 0, "block {} is queued twice", i);
  HEARTH_CHECK(priority <= kMaxRetentionPriority, "retention priority {} above {}", priority, kMaxRetentionPriority);
  if (!has_key) {
    link_front(i, 0);
    return;
  }
  const bool expired = expires_at != kNoExpiry && expires_at <= now;
  const int32_t level = expired ? 1 : 1 + priority;
  link_back(i, level);
  links_[i].pushed = ++num_pushed_;
  if (level > 1 && expires_at != kNoExpiry) {
    links_[i].expires_at = expires_at;
    expiring_.emplace(expires_at, links_[i].pushed, i);
  }
}

void RetentionQueue::remove(int32_t i) {
  HEARTH_CHECK(links_[i].level >= 0, "block {} is not in the free queue", i);
  Link& l = links_[i];
  if (l.expires_at != kNoExpiry) {
    expiring_.erase({l.expires_at, l.pushed, i});
    l.expires_at = kNoExpiry;
  }
  unlink(i);
}

void RetentionQueue::expire(int64_t now) {
  while (!expiring_.empty() && std::get<0>(*expiring_.begin()) <= now) {
    const int32_t i = std::get<2>(*expiring_.begin());
    expiring_.erase(expiring_.begin());
    links_[i].expires_at = kNoExpiry;
    unlink(i);
    link_back(i, 1);
  }
}

std::optional<int32_t> RetentionQueue::victim() const {
  for (size_t w = 0; w < nonempty_.size(); ++w) {
    if (nonempty_[w] != 0) return head_[w * 64 + static_cast<size_t>(std::countr_zero(nonempty_[w]))];
  }
  return std::nullopt;
}

std::vector<int32_t> RetentionQueue::order() const {
  std::vector<int32_t> out;
  out.reserve(size_);
  for (int32_t level = 0; level < kNumLevels; ++level) {
    for (int32_t i = head_[level]; i >= 0; i = links_[i].next) out.push_back(i);
  }
  return out;
}

void RetentionQueue::check_invariants() const {
  const auto n = static_cast<int32_t>(links_.size());
  int32_t total = 0;
  size_t num_expiring = 0;
  for (int32_t level = 0; level < kNumLevels; ++level) {
    int32_t count = 0, prev = -1;
    for (int32_t i = head_[level]; i >= 0; i = links_[i].next) {
      HEARTH_CHECK(count < n, "free queue level {} has a cycle", level);
      HEARTH_CHECK(links_[i].prev == prev, "free queue back link broken at block {}", i);
      HEARTH_CHECK(links_[i].level == level, "block {} linked at level {} but marked {}", i, level, links_[i].level);
      if (links_[i].expires_at != kNoExpiry) {
        HEARTH_CHECK(level > 1 && expiring_.contains({links_[i].expires_at, links_[i].pushed, i}),
                     "block {} expiry not tracked", i);
        ++num_expiring;
      }
      prev = i;
      ++count;
    }
    HEARTH_CHECK(prev == tail_[level], "free queue level {} tail is {}, list ends at {}", level, tail_[level], prev);
    HEARTH_CHECK(count == count_[level], "level {} holds {} blocks, counter says {}", level, count, count_[level]);
    const bool bit = (nonempty_[level / 64] >> (level % 64)) & 1;
    HEARTH_CHECK(bit == (count > 0), "level {} bitmap bit {} with {} blocks", level, bit, count);
    total += count;
  }
  HEARTH_CHECK(total == size_, "free queue holds {} blocks, counter says {}", total, size_);
  HEARTH_CHECK(num_expiring == expiring_.size(), "expiry set has {} entries, queued blocks {}", expiring_.size(),
               num_expiring);
}

}  // namespace hearth

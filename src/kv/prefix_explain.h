#pragma once
// Why prefix reuse stopped where it did, in token ids and indexes only (the server turns them into text).
//
//   prompt:  [ shared block ][ shared block ][ s s s x x x ...      reuse_stopped_at = 2 * bs + 3
//   cached:  [ shared block ][ shared block ][ s s s c c c ] → ...  cached_continuation = c c c ...
//
// Reasons, checked in this order once reuse stopped short of max_tokens:
//   window_evicted   the prompt's blocks are cached further, but the sliding-window layers' K/V of a block a hit
//                    there would read was evicted (evicted_block: the first block not reused)
//   no_checkpoint    hybrid models: the prompt's KV is cached further (kv_matched_tokens), but the recurrent state
//                    was checkpointed last after reuse_stopped_at, where the request resumes
//   evicted          the prompt's next full block was cached earlier and has been evicted since
//   different_salt   the same tokens are cached further under another namespace (another cache_salt)
//   diverged         a cached prefix continues differently from reuse_stopped_at on
//   end_of_cached_prefix  what is cached ends there; the rest of the prompt is new
//   no_cached_prefix nothing of the prompt is cached
// plus end_of_prompt (everything that may be reused was: reuse reached max_tokens, since a request's last prompt
// token is always computed, or only a tail that does not fill a block is left, and only full blocks are cached)
// and cache_disabled (the request opted out of the cache).

#include <cstdint>
#include <vector>

#include "kv/block_hash.h"
#include "util/ids.h"

namespace hearth {

enum class ReuseStop {
  kEndOfPrompt,
  kDiverged,
  kEvicted,
  kDifferentSalt,
  kEndOfCachedPrefix,
  kNoCachedPrefix,
  kCacheDisabled,
  kWindowEvicted,
  kNoCheckpoint,
};

// "end_of_prompt", "diverged", "evicted", "different_salt", "end_of_cached_prefix", "no_cached_prefix",
// "cache_disabled", "window_evicted", "no_checkpoint".
const char* reuse_stop_name(ReuseStop reason);

struct PrefixExplanation {
  ReuseStop reason = ReuseStop::kNoCachedPrefix;
  int32_t num_tokens = 0;        // tokens that could have been reused (max_tokens of the query)
  int32_t reuse_stopped_at = 0;  // first token that is not reusable now (= reusable tokens)
  int32_t num_cached_blocks = 0;  // whole blocks shared
  int32_t num_copied_tokens = 0;  // tokens reusable by copying from a partially matching block
  // kDiverged: the nearest cached prefix's tokens from reuse_stopped_at on (at most kMaxContinuation).
  std::vector<TokenId> cached_continuation;
  // kEvicted: index of the prompt's block that was evicted; kWindowEvicted: the first block not reused.
  int32_t evicted_block = -1;
  // kDifferentSalt: the namespace holding more of the prompt, and how many tokens it could reuse there.
  BlockHash other_namespace;
  int32_t other_namespace_tokens = 0;
  // kNoCheckpoint: the prompt's tokens whose KV is cached (the hit resumes earlier, at the last checkpoint).
  int32_t kv_matched_tokens = 0;

  static constexpr int32_t kMaxContinuation = 48;
};

}  // namespace hearth

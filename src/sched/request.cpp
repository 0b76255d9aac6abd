#include "sched/request.h"

#include <algorithm>

namespace hearth {

bool Request::is_stop_token(TokenId token) const {
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), token) != stop_token_ids.end();
}

FinishReason token_finish_reason(const Request& r, TokenId sampled) {
  if (r.is_stop_token(sampled)) return FinishReason::kStop;
  return r.num_output_tokens() >= r.max_tokens ? FinishReason::kLength : FinishReason::kNone;
}

}  // namespace hearth

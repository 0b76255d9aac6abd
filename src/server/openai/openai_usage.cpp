// Rendering of usage (OpenAI's fields and the `hearth` extension, for one choice or n) and of cache reports.

#include "server/openai/openai_json.h"

namespace hearth::server {

using nlohmann::json;

nlohmann::json reuse_stop_detail_json(const ReuseExplanation& r) {
  json detail = {{"block", r.stopped_block}, {"block_size", r.block_size}};
  if (!r.reason) return detail;
  auto with_text = [&] {
    detail["context_text"] = r.context_text;
    detail["prompt_text"] = r.prompt_text;
  };
  switch (*r.reason) {
    case ReuseStop::kDiverged:
      with_text();
      detail["cached_text"] = r.cached_text;
      break;
    case ReuseStop::kEvicted:
    case ReuseStop::kWindowEvicted:
      with_text();
      detail["evicted_block"] = r.evicted_block;
      break;
    case ReuseStop::kDifferentSalt:
      with_text();
      detail["other_salt_tokens"] = r.other_salt_tokens;
      break;
    case ReuseStop::kNoCheckpoint:
      with_text();
      detail["kv_matched_tokens"] = r.kv_matched_tokens;
      break;
    case ReuseStop::kEndOfCachedPrefix:
      with_text();
      break;
    case ReuseStop::kEndOfPrompt:
    case ReuseStop::kNoCachedPrefix:
    case ReuseStop::kCacheDisabled:
      break;
  }
  return detail;
}

namespace {

json reuse_reason_json(const ReuseExplanation& r) {
  return r.reason ? json(reuse_stop_name(*r.reason)) : json();
}

// OpenAI's predicted-output counts: the prediction's tokens the answers accepted as drafts, and the rest of the
// prediction's tokens (drafted and rejected, or never reached), summed over the choices.
json prediction_details(std::span<const RequestUsage> choices) {
  int32_t accepted = 0;
  int32_t rejected = 0;
  for (const RequestUsage& c : choices) {
    accepted += c.accepted_prediction_tokens;
    rejected += std::max(0, c.prediction_tokens - c.accepted_prediction_tokens);
  }
  return {{"accepted_prediction_tokens", accepted}, {"rejected_prediction_tokens", rejected}};
}

}  // namespace

nlohmann::json cache_report_json(const CacheReport& report, const std::string& model) {
  return json{
      {"object", "cache.explanation"},
      {"model", model},
      {"prompt_tokens", report.prompt_tokens},
      {"cached_tokens", report.cached_tokens},
      {"reusable_tokens", report.reusable_tokens},
      {"tiers", {{"ram", report.cached_tokens_ram}, {"disk", report.cached_tokens_disk}}},
      {"reuse_stopped_at", report.explanation.stopped_at},
      {"reuse_stop_reason", reuse_reason_json(report.explanation)},
      {"reuse_stop", reuse_stop_detail_json(report.explanation)},
  };
}

nlohmann::json usage_json(const RequestUsage& u, const CompletionRequest& request, int32_t answer_tokens_reused) {
  json hearth = {
      {"reused_tokens", u.cached_tokens},
      {"copied_tokens", u.copied_tokens},
      {"computed_prompt_tokens", u.prompt_tokens - u.cached_tokens},
      {"reuse_stopped_at", u.cached_tokens},
      {"prefill_ms", u.prefill_ms},
      {"ttft_ms", u.ttft_ms},
      {"total_ms", u.total_ms},
      {"preemptions", u.preemptions},
      {"stopped_by_kv_pool", u.stopped_by_kv_pool},
      {"cache", request.use_cache ? "on" : "off"},
      {"answer_tokens_reused", answer_tokens_reused},
  };
  const int32_t redis_tokens = u.tier.loaded_tokens_redis;
  const int32_t disk_tokens = u.tier.loaded_tokens - redis_tokens;
  hearth["tiers"] = {{"ram", u.cached_tokens - u.tier.loaded_tokens}, {"disk", disk_tokens}, {"redis", redis_tokens}};
  if (u.tier.found_tokens > 0) {
    // The load-or-recompute decision on the blocks the lower tiers held (README "Tiers"; docs/cluster.md).
    const bool found_disk = u.tier.found_tokens > u.tier.found_tokens_redis;
    const bool found_redis = u.tier.found_tokens_redis > 0;
    hearth["tier_load"] = {
        {"tier", found_disk && found_redis ? "disk+redis" : (found_redis ? "redis" : "disk")},
        {"found_tokens", u.tier.found_tokens},
        {"decision", u.tier.load ? "load" : "recompute"},
        {"estimated_load_ms", u.tier.est_load_ms},
        {"estimated_recompute_ms", u.tier.est_recompute_ms},
        {"loaded_tokens", u.tier.loaded_tokens},
        {"timed_out", u.tier.timed_out},
    };
  }
  if (u.verify_steps > 0) {
    hearth["speculative"] = {
        {"drafted_tokens", u.drafted_tokens}, {"accepted_tokens", u.accepted_tokens}, {"verify_steps", u.verify_steps}};
  }
  hearth["reuse_stop_reason"] = reuse_reason_json(u.reuse);
  if (u.reuse.reason) hearth["reuse_stop"] = reuse_stop_detail_json(u.reuse);
  if (u.max_tokens_clamped_to > 0) hearth["max_tokens_clamped_to"] = u.max_tokens_clamped_to;
  if (request.pin_prefix) {
    hearth["pinned_tokens"] = u.pinned_tokens;
    hearth["pin_error"] = u.pin_error.empty() ? json() : json(u.pin_error);
  }
  json usage = {
      {"prompt_tokens", u.prompt_tokens},
      {"completion_tokens", u.completion_tokens},
      {"total_tokens", u.prompt_tokens + u.completion_tokens},
      {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
      {"hearth", std::move(hearth)},
  };
  if (request.has_prediction) usage["completion_tokens_details"] = prediction_details({&u, 1});
  return usage;
}

nlohmann::json usage_json(std::span<const RequestUsage> choices, const CompletionRequest& request,
                          int32_t answer_tokens_reused) {
  HEARTH_CHECK(!choices.empty(), "usage of no choices");
  json usage = usage_json(choices.front(), request, answer_tokens_reused);
  if (choices.size() == 1) return usage;
  int32_t completion_tokens = 0;
  int32_t computed_prompt_tokens = 0;
  json per_choice = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const RequestUsage& c = choices[i];
    completion_tokens += c.completion_tokens;
    computed_prompt_tokens += c.prompt_tokens - c.cached_tokens;
    json entry = {{"index", i},
                  {"reused_tokens", c.cached_tokens},
                  {"computed_prompt_tokens", c.prompt_tokens - c.cached_tokens},
                  {"completion_tokens", c.completion_tokens}};
    if (c.verify_steps > 0) {  // speculative decoding verified drafts for this choice
      entry["drafted_tokens"] = c.drafted_tokens;
      entry["accepted_tokens"] = c.accepted_tokens;
    }
    per_choice.push_back(std::move(entry));
  }
  usage["completion_tokens"] = completion_tokens;
  usage["total_tokens"] = choices.front().prompt_tokens + completion_tokens;
  usage["hearth"]["computed_prompt_tokens"] = computed_prompt_tokens;
  usage["hearth"]["choices"] = std::move(per_choice);
  if (request.has_prediction) usage["completion_tokens_details"] = prediction_details(choices);
  return usage;
}

}  // namespace hearth::server

#include "server/models/model_budget.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/result.h"
#include "util/units.h"

namespace hearth::server {

const char* model_state_name(ModelState state) {
  switch (state) {
    case ModelState::kUnloaded:
      return "unloaded";
    case ModelState::kLoading:
      return "loading";
    case ModelState::kLoaded:
      return "loaded";
    case ModelState::kUnloading:
      return "unloading";
  }
  return "unknown";
}

size_t ModelBudget::add(std::string id, ModelCost cost) {
  models_.push_back(Entry{std::move(id), cost});
  return models_.size() - 1;
}

int64_t ModelBudget::used_bytes() const {
  int64_t used = process_bytes_;
  for (const Entry& e : models_) used += e.state == ModelState::kUnloaded ? 0 : e.cost.total();
  return used;
}

ModelBudget::Plan ModelBudget::plan_load(size_t i, const BusyFn& busy) const {
  HEARTH_CHECK(models_[i].state == ModelState::kUnloaded, "plan_load needs an unloaded model");
  Plan plan;
  plan.needed_bytes = models_[i].cost.total();
  plan.budget_bytes = budget_bytes_;
  plan.free_bytes = budget_bytes_ - used_bytes();
  if (plan.needed_bytes > budget_bytes_ - process_bytes_) {
    const ModelCost& c = models_[i].cost;
    plan.kind = Plan::Kind::kNever;
    plan.message = fmt::format(
        "the model '{}' needs {} ({} of weights + {} of KV pool + {} of scratch and tokenizer), more than the memory budget of {} "
        "less the {} the server itself holds (--memory; a smaller --kv-memory shrinks the pool)",
        models_[i].id, format_bytes(plan.needed_bytes), format_bytes(c.weights_bytes), format_bytes(c.kv_bytes),
        format_bytes(c.runtime_bytes), format_bytes(budget_bytes_), format_bytes(process_bytes_));
    return plan;
  }
  if (plan.needed_bytes <= plan.free_bytes) return plan;
  std::vector<size_t> idle;
  for (size_t j = 0; j < models_.size(); ++j) {
    if (models_[j].state == ModelState::kLoaded && !busy(j)) idle.push_back(j);
  }
  std::sort(idle.begin(), idle.end(), [&](size_t a, size_t b) {
    const Entry& x = models_[a];
    const Entry& y = models_[b];
    return x.last_used != y.last_used ? x.last_used < y.last_used : x.use_order < y.use_order;
  });
  int64_t room = plan.free_bytes;
  for (size_t j : idle) {
    if (room >= plan.needed_bytes) break;
    plan.victims.push_back(j);
    room += models_[j].cost.total();
  }
  if (room >= plan.needed_bytes) {
    plan.kind = Plan::Kind::kEvict;
    return plan;
  }
  plan.kind = Plan::Kind::kWait;
  plan.victims.clear();
  plan.message = fmt::format(
      "the model '{}' needs {} and {} of the {} budget is free; the models that would have to unload are busy",
      models_[i].id, format_bytes(plan.needed_bytes), format_bytes(std::max<int64_t>(plan.free_bytes, 0)),
      format_bytes(budget_bytes_));
  return plan;
}

void ModelBudget::set_state(size_t i, ModelState state) {
  if (state == ModelState::kLoaded && models_[i].state != ModelState::kLoaded) models_[i].num_loads++;
  models_[i].state = state;
  if (state == ModelState::kUnloaded) models_[i].keep_alive.reset();
}

void ModelBudget::touch(size_t i, Clock::time_point now) {
  models_[i].last_used = now;
  models_[i].use_order = next_use_++;
}

std::vector<size_t> ModelBudget::expired(Clock::time_point now, Clock::duration keep_alive, const BusyFn& busy) const {
  std::vector<size_t> out;
  for (size_t j = 0; j < models_.size(); ++j) {
    const Entry& e = models_[j];
    const Clock::duration k = e.keep_alive.value_or(keep_alive);
    if (e.state == ModelState::kLoaded && k != kKeepForever && now - e.last_used >= k && !busy(j)) out.push_back(j);
  }
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return models_[a].use_order < models_[b].use_order; });
  return out;
}

ModelBudget::Clock::time_point ModelBudget::next_expiry(Clock::duration keep_alive, const BusyFn& busy) const {
  auto next = Clock::time_point::max();
  for (size_t j = 0; j < models_.size(); ++j) {
    const Entry& e = models_[j];
    const Clock::duration k = e.keep_alive.value_or(keep_alive);
    if (e.state == ModelState::kLoaded && k != kKeepForever && !busy(j)) next = std::min(next, e.last_used + k);
  }
  return next;
}

}  // namespace hearth::server

#include "bench_client/workload.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace hearth::bench {
namespace {

using nlohmann::json;

template <size_t N>
const char* pick(Rng& rng, const std::array<const char*, N>& words) {
  return words[rng.below(N)];
}

constexpr std::array kPeople = {"Ada", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hugo", "Ines", "Jonas"};
constexpr std::array kRooms = {"kitchen", "living room", "hallway", "garage", "attic", "bathroom", "garden", "study"};
constexpr std::array kDays = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
constexpr std::array kChores = {"water the plants",  "empty the dishwasher", "take out the recycling",
                                "feed the cat",      "vacuum the stairs",    "check the smoke alarms",
                                "wipe the counters", "sort the laundry",     "refill the bird feeder"};
constexpr std::array kThings = {"thermostat", "washing machine", "router",    "boiler",     "dishwasher", "doorbell",
                                "oven",       "freezer",         "heat pump", "garage door"};
constexpr std::array kVerbs = {"get", "set", "list", "add", "remove", "schedule", "check", "cancel", "find", "update"};
constexpr std::array kObjects = {"reminder", "shopping_item", "light_scene", "calendar_event", "recipe",
                                 "chore",    "temperature",   "timer",       "package",        "bill"};
constexpr std::array kTypes = {"string", "integer", "number", "boolean"};
constexpr std::array kFoods = {"lentil soup", "pancakes", "risotto", "tacos", "curry", "pasta bake", "stir fry"};

std::string rule(Rng& rng, int i) {
  switch (rng.below(4)) {
    case 0:
      return fmt::format("{}. Before {} on {}, ask {} whether it is still needed.", i, pick(rng, kChores),
                         pick(rng, kDays), pick(rng, kPeople));
    case 1:
      return fmt::format("{}. Never change the {} settings without a confirmation from {}.", i, pick(rng, kThings),
                         pick(rng, kPeople));
    case 2:
      return fmt::format("{}. Keep answers short, friendly and concrete; mention the {} only when asked.", i,
                         pick(rng, kRooms));
    default:
      return fmt::format("{}. {} is responsible for the {} this month; remind them politely.", i, pick(rng, kPeople),
                         pick(rng, kRooms));
  }
}

json tool(Rng& rng, int i) {
  const std::string name = fmt::format("{}_{}_{}", pick(rng, kVerbs), pick(rng, kObjects), i);
  json properties = json::object();
  json required = json::array();
  const int n_params = 1 + static_cast<int>(rng.below(4));
  for (int p = 0; p < n_params; ++p) {
    const std::string param = fmt::format("{}_{}", pick(rng, kObjects), p);
    properties[param] = {{"type", pick(rng, kTypes)},
                         {"description", fmt::format("The {} in the {}.", pick(rng, kThings), pick(rng, kRooms))}};
    if (rng.below(2) == 0) required.push_back(param);
  }
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", fmt::format("Use this to {} for the {}.", pick(rng, kChores), pick(rng, kRooms))},
            {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
}

std::string document_line(Rng& rng) {
  switch (rng.below(4)) {
    case 0:
      return fmt::format("- {}: {} cooks {}; dinner at {}:{:02d}.", pick(rng, kDays), pick(rng, kPeople),
                         pick(rng, kFoods), 17 + rng.below(3), 15 * rng.below(4));
    case 1:
      return fmt::format("- The {} in the {} was serviced in month {}; the code is {:04d}.", pick(rng, kThings),
                         pick(rng, kRooms), 1 + rng.below(12), rng.below(10000));
    case 2:
      return fmt::format("- {} will {} every {} before school.", pick(rng, kPeople), pick(rng, kChores),
                         pick(rng, kDays));
    default:
      return fmt::format("- Spare keys for the {} are with {}; the neighbour's number ends in {:03d}.",
                         pick(rng, kRooms), pick(rng, kPeople), rng.below(1000));
  }
}

std::string question_text(Rng& rng, size_t min_chars) {
  std::string q;
  while (q.size() < min_chars) {
    if (!q.empty()) q += ' ';
    switch (rng.below(4)) {
      case 0:
        q += fmt::format("Who has to {} on {}?", pick(rng, kChores), pick(rng, kDays));
        break;
      case 1:
        q += fmt::format("What is the code for the {} in the {}?", pick(rng, kThings), pick(rng, kRooms));
        break;
      case 2:
        q += fmt::format("Can {} cook {} this week?", pick(rng, kPeople), pick(rng, kFoods));
        break;
      default:
        q += fmt::format("Remind {} about the {}.", pick(rng, kPeople), pick(rng, kThings));
        break;
    }
  }
  return q;
}

}  // namespace

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t n) {
  return next() % n;
}  // the modulo bias is irrelevant for picking words

double Rng::unit() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double Rng::exponential(double rate) {
  return -std::log1p(-unit()) / rate;
}

std::string SharedPrefix::text() const {
  return fmt::format(
      "You are the household assistant of the family below.\n\n# House rules\n{}\n\n# Tools\nCall a tool by "
      "answering with its name and JSON arguments. The tools, as JSON schema:\n{}\n\n# Household document\n{}\n",
      house_rules, tool_catalogue, household_document);
}

Workload::Workload(const WorkloadConfig& config) : config_(config) {
  Rng rng(config.seed);
  // The prefix is split 20% rules, 30% tools, 50% document (by characters), each grown to its share.
  const size_t total_chars = static_cast<size_t>(std::max(config.prefix_tokens, 0)) * kCharsPerTokenEstimate;
  const size_t headings = SharedPrefix{}.text().size();
  const size_t budget = total_chars > headings ? total_chars - headings : 0;
  for (int i = 1; prefix_.house_rules.size() < budget / 5; ++i) {
    if (i > 1) prefix_.house_rules += '\n';
    prefix_.house_rules += rule(rng, i);
  }
  json tools = json::array();
  for (int i = 0; tools.dump().size() < budget * 3 / 10; ++i) tools.push_back(tool(rng, i));
  prefix_.tool_catalogue = tools.dump();
  const size_t doc_chars = budget - std::min(budget, prefix_.house_rules.size() + prefix_.tool_catalogue.size());
  while (prefix_.household_document.size() < doc_chars) {
    if (!prefix_.household_document.empty()) prefix_.household_document += '\n';
    prefix_.household_document += document_line(rng);
  }
  const size_t question_chars = static_cast<size_t>(std::max(config.question_tokens, 1)) * kCharsPerTokenEstimate;
  questions_.resize(std::max(config.users, 0));
  for (auto& user : questions_) {
    for (int t = 0; t < config.turns; ++t) user.push_back(question_text(rng, question_chars));
  }
}

std::string Workload::system_message(const std::string& nonce) const {
  if (nonce.empty()) return prefix_.text();
  return fmt::format("Session {}.\n{}", nonce, prefix_.text());
}

std::vector<double> poisson_arrivals(int count, double rate, uint64_t seed) {
  Rng rng(seed ^ 0x5eedf00dULL);
  std::vector<double> times;
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += rng.exponential(rate);
    times.push_back(t);
  }
  return times;
}

}  // namespace hearth::bench

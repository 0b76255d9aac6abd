#include "server/api/route_table.h"

#include <utility>

#include "util/result.h"

namespace hearth::server {
namespace {

bool path_matches(const std::string& route_path, const std::string& path) {
  const bool prefix = route_path.size() > 1 && route_path.back() == '/';
  return prefix ? path.size() > route_path.size() && path.starts_with(route_path) : path == route_path;
}

// The routes a client may reach without /v1: exact paths, and prefixes ending in '/' (an id follows).
constexpr std::string_view kV1Aliases[] = {
    "/chat/completions", "/completions",           "/models",     "/models/", "/responses", "/responses/",
    "/messages",         "/messages/count_tokens", "/embeddings",
};

}  // namespace

std::optional<std::string> v1_route_for_alias(std::string_view path) {
  for (const std::string_view alias : kV1Aliases) {
    const bool prefix = alias.back() == '/';
    if (prefix ? path.size() > alias.size() && path.starts_with(alias) : path == alias) {
      return "/v1" + std::string(path);
    }
  }
  return std::nullopt;
}

void Routes::add(std::string method, std::string path, Route route) {
  for (const Entry& e : entries_) {
    HEARTH_CHECK(e.method != method || e.path != path, "two routes for {} {}", method, path);
  }
  entries_.push_back({std::move(method), std::move(path), std::move(route)});
}

Routes::Match Routes::find(const HttpRequest& req) const {
  Match match;
  for (const Entry& e : entries_) {
    if (!path_matches(e.path, req.path)) continue;
    match.path_known = true;
    if (e.method != req.method) continue;
    match.route = &e.route;
    return match;
  }
  return match;
}

}  // namespace hearth::server

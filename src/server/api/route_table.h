#pragma once
// Routes: the table of the HTTP routes one server answers. Each feature fills it with its own add_*_routes
// function (declared in its folder's routes.h), and HttpServer's constructor (server.cpp) calls one per feature, so
// a new endpoint is a new file and one line there. HttpServer::handle looks requests up in it after the API key.
// A route reads an HttpRequest and returns an HttpResponse (http_types.h); it never sees the transport.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_types.h"

namespace hearth::server {

// Called on a route worker of the transport, any number at once.
using Route = std::function<HttpResponse(const HttpRequest&)>;

// The /v1 route a path without /v1 stands for (/chat/completions → /v1/chat/completions), for clients whose base URL
// lacks /v1: the one alias table, applied by the transport of either front (HttpTransportConfig::alias_path) before
// the API key, the route lookup and the error shape see the path. nullopt: the path is no alias.
[[nodiscard]] std::optional<std::string> v1_route_for_alias(std::string_view path);

class Routes {
 public:
  // Answers `method` on `path` with `route`. `path` is exact, or, when it ends in '/' (except "/" itself), every
  // longer path that starts with it. Requires: no route yet for the same method and path (aborts otherwise).
  void add(std::string method, std::string path, Route route);

  // The route for the request's method and path, in the order they were added (nullptr: none), and whether some
  // route serves the path at all (with another method: a 405 rather than a 404).
  struct Match {
    const Route* route = nullptr;
    bool path_known = false;
  };
  [[nodiscard]] Match find(const HttpRequest& req) const;

 private:
  struct Entry {
    std::string method;
    std::string path;
    Route route;
  };
  std::vector<Entry> entries_;
};

}  // namespace hearth::server

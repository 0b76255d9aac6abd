#include "server/http/json_body.h"

#include <fmt/format.h>

namespace hearth::server {
namespace {

using nlohmann::json;
using DomParser = nlohmann::detail::json_sax_dom_parser<json>;

// nlohmann's own DOM builder behind a depth counter: start_object/start_array past the limit return false, which
// stops sax_parse at once. nlohmann's parser itself is iterative, so the only recursion left is in later tree
// operations, which now see at most `max_depth` levels.
class DepthLimitedDom {
 public:
  DepthLimitedDom(json& root, int max_depth) : dom_(root, /*allow_exceptions=*/false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_object() { return --depth_, dom_.end_object(); }
  bool end_array() { return --depth_, dom_.end_array(); }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, token, e);
  }

  bool too_deep() const { return too_deep_; }

 private:
  bool enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }

  DomParser dom_;
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

Result<nlohmann::json, JsonBodyError> parse_json_body(std::string_view body, int max_depth) {
  json root;
  DepthLimitedDom sax(root, max_depth);
  // With allow_exceptions off the DOM builder reports parse errors by returning false, so this does not throw.
  const bool ok = json::sax_parse(body.begin(), body.end(), &sax);
  if (sax.too_deep()) {
    return JsonBodyError{fmt::format("the request body nests deeper than {} levels of arrays and objects", max_depth),
                         "json_too_deep"};
  }
  if (!ok) return JsonBodyError{"the request body is not valid JSON", "invalid_json"};
  return root;
}

}  // namespace hearth::server

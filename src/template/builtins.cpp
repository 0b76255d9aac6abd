// Filters, tests and global functions of the chat-template language.
#include <algorithm>
#include <climits>
#include <cmath>
#include <ctime>
#include <optional>

#include "template/interpreter.h"
#include "template/strings.h"
#include "util/html.h"

namespace hearth::tmpl {
namespace {

const Value* arg(const CallArgs& args, std::string_view name, size_t index) {
  return args.get(name, index);
}

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(utf8_length(v.as_string()));
  if (v.is_array()) return static_cast<int64_t>(v.as_array().size());
  if (v.is_object()) return static_cast<int64_t>(v.as_object().items.size());
  if (v.is_undefined()) return 0;
  throw_error(std::string("object of type '") + v.type_name() + "' has no len()");
}

// Arguments after the first `skip` positionals, for forwarding to a test or filter (selectattr, map, ...).
CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

// selectattr/rejectattr/select/reject: keep items whose (attribute's) test result equals `keep`.
Value filter_items(Interpreter& in, const Value& input, const CallArgs& args, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    const Value* a = arg(args, "attribute", next++);
    if (a == nullptr || !a->is_string()) throw_error("selectattr/rejectattr need an attribute name");
    attribute = a->as_string();
  }
  const Value* test = next < args.positional.size() ? &args.positional[next] : nullptr;
  if (test != nullptr && !test->is_string()) throw_error("select/reject test name must be a string");
  const CallArgs test_args = rest_args(args, next + 1);
  Array out;
  for (const Value& item : iterate(input)) {
    in.count_steps(1);
    const Value subject = by_attr ? get_attr(item, attribute) : item;
    const bool ok = test ? apply_test(in, test->as_string(), subject, test_args) : subject.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map_filter(Interpreter& in, const Value& input, const CallArgs& args) {
  Array out;
  if (const Value* attribute = arg(args, "attribute", 9999)) {
    const Value* fallback = arg(args, "default", 9999);
    for (const Value& item : iterate(input)) {
      Value v = attribute->is_int() ? get_item(item, *attribute) : get_attr(item, attribute->str());
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    throw_error("map() needs a filter name or attribute=");
  const CallArgs filter_args = rest_args(args, 1);
  for (const Value& item : iterate(input))
    out.push_back(apply_filter(in, args.positional[0].as_string(), item, filter_args));
  return Value(std::move(out));
}

Value join_filter(const Value& input, const CallArgs& args) {
  const Value* sep = arg(args, "d", 0);
  const Value* attribute = arg(args, "attribute", 1);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    out += (first ? "" : (sep ? sep->str() : "")) + (attribute ? get_attr(item, attribute->str()) : item).str();
    first = false;
  }
  return Value(std::move(out));
}

Value items_filter(const Value& input) {
  if (input.is_undefined()) return Value(Array{});
  if (!input.is_object()) throw_error(std::string("items filter needs a mapping, got ") + input.type_name());
  Array out;
  for (const auto& [k, v] : input.as_object().items) out.push_back(Value::tuple(Array{Value(k), v}));
  return Value(std::move(out));
}

Value round_filter(const Value& input, const CallArgs& args) {
  if (!input.is_number() && !input.is_bool()) throw_error("round filter needs a number");
  const Value* precision = arg(args, "precision", 0);
  const Value* method = arg(args, "method", 1);
  const double scale = std::pow(10.0, precision && precision->is_int() ? precision->as_int() : 0);
  const double x = input.as_double() * scale;
  const std::string m = method ? method->str() : "common";
  // Python's round(): halves go to the even neighbour (round(2.5) == 2.0), as std::nearbyint does by default.
  const double r = m == "floor" ? std::floor(x) : m == "ceil" ? std::ceil(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value sort_filter(const Value& input, const CallArgs& args) {
  std::vector<Value> items = iterate(input);
  const Value* reverse = arg(args, "reverse", 0);
  const Value* attribute = arg(args, "attribute", 2);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const Value x = attribute ? get_attr(a, attribute->str()) : a;
    const Value y = attribute ? get_attr(b, attribute->str()) : b;
    return compare_values(x, y) < 0;
  });
  if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value indent_filter(const Value& input, const CallArgs& args) {
  const Value* width = arg(args, "width", 0);
  const Value* first = arg(args, "first", 1);
  const Value* blank = arg(args, "blank", 2);
  const std::string pad = width && width->is_string()
                              ? width->as_string()
                              : std::string(width && width->is_int() ? width->as_int() : 4, ' ');
  const Value newline("\n");
  const std::vector<std::string> lines = py_split(input.str(), &newline, -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    const bool skip = (i == 0 && !(first && first->truthy())) || (lines[i].empty() && !(blank && blank->truthy()));
    out += (skip ? "" : pad) + lines[i];
  }
  return Value(std::move(out));
}

Value number_filter(const Value& input, const CallArgs& args, bool to_float) {
  const Value* fallback = arg(args, "default", 0);
  const Value def = fallback ? *fallback : to_float ? Value(0.0) : Value(int64_t{0});
  if (input.is_int() || input.is_bool()) return to_float ? Value(input.as_double()) : Value(int64_t(input.as_double()));
  if (input.is_float()) return to_float ? input : Value(static_cast<int64_t>(std::trunc(input.as_double())));
  if (!input.is_string()) return def;
  const std::string s = py_strip(input.as_string(), true, true, nullptr);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d)) return def;
  return to_float ? Value(d) : Value(static_cast<int64_t>(std::trunc(d)));
}

Value min_max(const Value& input, bool want_max) {
  std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("min/max of empty sequence");
  Value best = items[0];
  for (const Value& v : items) {
    if ((compare_values(v, best) > 0) == want_max && compare_values(v, best) != 0) best = v;
  }
  return best;
}

// Filters, first part (the table is split in two only to keep functions short).
std::optional<Value> scalar_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "trim") return Value(py_strip(input.str(), true, true, arg(args, "chars", 0)));
  if (name == "length" || name == "count") return Value(length_of(input));
  if (name == "tojson") {
    const Value* indent = arg(args, "indent", 0);
    const Value* sort_keys = arg(args, "sort_keys", 9999);
    std::string json =
        input.to_json(indent && indent->is_int() ? static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64)) : -1,
                      sort_keys && sort_keys->truthy());
    in.check_size(json.size());
    return Value(std::move(json));
  }
  if (name == "string") return Value(input.str());
  if (name == "upper") return Value(ascii_upper(input.str()));
  if (name == "lower") return Value(ascii_lower(input.str()));
  if (name == "title") return Value(py_title(input.str()));
  if (name == "capitalize") return Value(py_capitalize(input.str()));
  if (name == "default" || name == "d") {
    const Value* fallback = arg(args, "default_value", 0);
    const Value* boolean = arg(args, "boolean", 1);
    const bool use_default = input.is_undefined() || (boolean && boolean->truthy() && !input.truthy());
    return use_default ? (fallback ? *fallback : Value("")) : input;
  }
  if (name == "first" || name == "last") {
    std::vector<Value> items = iterate(input);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") return join_filter(input, args);
  if (name == "items") return items_filter(input);
  if (name == "list") return Value(iterate(input));
  if (name == "replace") {
    const Value* from = arg(args, "old", 0);
    const Value* to = arg(args, "new", 1);
    const Value* count = arg(args, "count", 2);
    if (!from || !to) throw_error("replace filter needs two arguments");
    return Value(py_replace(input.str(), from->str(), to->str(), count && count->is_int() ? count->as_int() : -1));
  }
  if (name == "round") return round_filter(input, args);
  if (name == "int" || name == "float") return number_filter(input, args, name == "float");
  if (name == "abs") {
    if (input.is_int())
      return input.as_int() == INT64_MIN ? Value(-input.as_double()) : Value(std::abs(input.as_int()));
    if (input.is_float()) return Value(std::fabs(input.as_double()));
    throw_error("abs filter needs a number");
  }
  return std::nullopt;
}

// Filters, second part: mostly over sequences.
std::optional<Value> sequence_filter(Interpreter& in, const std::string& name, const Value& input,
                                     const CallArgs& args) {
  if (name == "selectattr" || name == "rejectattr") return filter_items(in, input, args, true, name == "selectattr");
  if (name == "select" || name == "reject") return filter_items(in, input, args, false, name == "select");
  if (name == "map") return map_filter(in, input, args);
  if (name == "sort") return sort_filter(input, args);
  if (name == "dictsort") return sort_filter(items_filter(input), {});
  if (name == "reverse") {
    if (input.is_string()) {
      std::string out;
      std::vector<Value> chars = iterate(input);
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value(std::move(out));
    }
    std::vector<Value> items = iterate(input);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (const Value& v : iterate(input)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(v); })) out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (name == "indent") return indent_filter(input, args);
  if (name == "safe") return input;
  if (name == "escape" || name == "e") return Value(html_escape(input.str()));
  if (name == "wordcount") return Value(static_cast<int64_t>(py_split(input.str(), nullptr, -1).size()));
  if (name == "sum") {
    Value total(int64_t{0});
    for (const Value& v : iterate(input)) total = binary_op(in, "+", total, v);
    return total;
  }
  if (name == "min" || name == "max") return min_max(input, name == "max");
  return std::nullopt;
}

}  // namespace

bool is_known_filter(const std::string& name) {
  static constexpr std::string_view kNames[] = {
      "trim",       "length",  "count", "tojson",  "string",   "upper",      "lower",      "title",
      "capitalize", "default", "d",     "first",   "last",     "join",       "items",      "list",
      "replace",    "round",   "int",   "float",   "abs",      "selectattr", "rejectattr", "select",
      "reject",     "map",     "sort",  "reverse", "indent",   "safe",       "escape",     "e",
      "sum",        "min",     "max",   "unique",  "dictsort", "wordcount"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value apply_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args) {
  if (std::optional<Value> v = scalar_filter(in, name, input, args)) return *v;
  if (std::optional<Value> v = sequence_filter(in, name, input, args)) return *v;
  throw_error("unknown filter '" + name + "'");
}

bool is_known_test(const std::string& name) {
  static constexpr std::string_view kNames[] = {
      "defined", "undefined", "none",     "boolean",  "false",    "true",  "integer", "float",       "number",
      "string",  "mapping",   "iterable", "sequence", "callable", "even",  "odd",     "divisibleby", "eq",
      "equalto", "==",        "ne",       "!=",       "lt",       "<",     "le",      "<=",          "gt",
      ">",       "ge",        ">=",       "in",       "lower",    "upper", "sameas"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* other = arg(args, "value", 0);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !v.as_object().is_namespace;
  if (name == "iterable" || name == "sequence")
    return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "even" || name == "odd") {
    if (!v.is_int()) throw_error("even/odd test needs an integer");
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (name == "lower") return v.is_string() && ascii_lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && ascii_upper(v.as_string()) == v.as_string();
  if (other == nullptr) throw_error("test '" + name + "' needs an argument");
  if (name == "divisibleby") {
    if (!v.is_int() || !other->is_int() || other->as_int() == 0) throw_error("divisibleby needs non-zero integers");
    return v.as_int() % other->as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return v.equals(*other);
  if (name == "ne" || name == "!=") return !v.equals(*other);
  if (name == "lt" || name == "<") return compare_values(v, *other) < 0;
  if (name == "le" || name == "<=") return compare_values(v, *other) <= 0;
  if (name == "gt" || name == ">") return compare_values(v, *other) > 0;
  if (name == "ge" || name == ">=") return compare_values(v, *other) >= 0;
  if (name == "in") return binary_op(in, "in", v, *other).truthy();
  throw_error("unknown test '" + name + "'");
}

namespace {

Value range_fn(Interpreter& in, const CallArgs& args) {
  std::vector<int64_t> n;
  for (const Value& v : args.positional) {
    if (!v.is_int()) throw_error("range() arguments must be integers");
    n.push_back(v.as_int());
  }
  if (n.empty() || n.size() > 3) throw_error("range() takes 1 to 3 arguments");
  const int64_t start = n.size() == 1 ? 0 : n[0];
  const int64_t stop = n.size() == 1 ? n[0] : n[1];
  const int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) throw_error("range() step must not be zero");
  const __int128 span = static_cast<__int128>(stop) - start;
  const __int128 count = (span > 0) == (step > 0) && span != 0 ? (span + step - (step > 0 ? 1 : -1)) / step : 0;
  in.count_steps(static_cast<int64_t>(std::min<__int128>(count, INT64_MAX / 2)));
  Array out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.emplace_back(static_cast<int64_t>(start + static_cast<__int128>(k) * step));
  return Value(std::move(out));
}

Value namespace_fn(Interpreter&, const CallArgs& args) {
  Object ns;
  ns.is_namespace = true;
  for (const Value& v : args.positional) {
    if (!v.is_object()) throw_error("namespace() positional arguments must be mappings");
    for (const auto& [k, item] : v.as_object().items) ns.set(k, item);
  }
  for (const auto& [k, v] : args.keyword) ns.set(k, v);
  return Value(std::move(ns));
}

Value strftime_fn(Interpreter& in, const CallArgs& args) {
  const Value* format = arg(args, "format", 0);
  if (format == nullptr || !format->is_string()) throw_error("strftime_now() needs a format string");
  const std::time_t t = std::chrono::system_clock::to_time_t(in.now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), format->as_string().c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

void add_builtin_globals(Object& globals) {
  const auto add = [&](const char* name, std::function<Value(Interpreter&, const CallArgs&)> fn) {
    if (globals.find(name) == nullptr) globals.set(name, Value(Callable{name, std::move(fn)}));
  };
  add("range", range_fn);
  add("namespace", namespace_fn);
  add("strftime_now", strftime_fn);
  add("raise_exception", [](Interpreter&, const CallArgs& args) -> Value {
    const Value* message = arg(args, "message", 0);
    throw TemplateError{message ? message->str() : "raise_exception() called", true, true};
  });
  add("dict", [](Interpreter&, const CallArgs& args) -> Value {
    Object out;
    for (const auto& [k, v] : args.keyword) out.set(k, v);
    return Value(std::move(out));
  });
}

}  // namespace hearth::tmpl

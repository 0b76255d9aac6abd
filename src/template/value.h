#pragma once
// Value: the dynamic value of the chat-template language (a Jinja subset), with Python semantics for truthiness,
// equality, str() and repr(), and HF transformers' tojson (json.dumps, ensure_ascii=False).
// Internal to hearth_template: errors inside the interpreter are thrown as TemplateError and caught at the
// ChatTemplate API, so no exception leaves the module.

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace hearth::tmpl {

// A template parse or render failure; never escapes ChatTemplate.
struct TemplateError {
  std::string message;
  bool raised = false;   // raised by the template itself (raise_exception): message is the template's own text
  bool located = false;  // message already starts with "line:col: "
};
[[noreturn]] void throw_error(std::string message);

class Value;
class Interpreter;
using Array = std::vector<Value>;

// An insertion-ordered string-keyed dict (Python dicts keep order, and tojson must too).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): attributes assignable with {% set ns.x = ... %}

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, or else positional[index], or else nullptr.
  const Value* get(std::string_view name, size_t index) const;
};

// A builtin function, bound method or macro.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, const CallArgs&)> fn;
};

struct Undefined {
  std::string name;  // what was looked up, for error messages
};

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, array, object, callable };

  Value() : data_(Undefined{}) {}
  static Value undefined(std::string name) { return Value(Data(Undefined{std::move(name)})); }
  static Value none() { return Value(Data(nullptr)); }
  // A Python tuple: an array that prints as (a, b) and never equals a list.
  static Value tuple(Array a) {
    Value v(std::move(a));
    v.tuple_ = true;
    return v;
  }
  Value(bool b) : data_(b) {}                                             // NOLINT(google-explicit-constructor)
  Value(int64_t i) : data_(i) {}                                          // NOLINT(google-explicit-constructor)
  Value(int i) : data_(int64_t{i}) {}                                     // NOLINT(google-explicit-constructor)
  Value(double d) : data_(d) {}                                           // NOLINT(google-explicit-constructor)
  Value(std::string s) : data_(std::move(s)) {}                           // NOLINT(google-explicit-constructor)
  Value(const char* s) : data_(std::string(s)) {}                         // NOLINT(google-explicit-constructor)
  Value(Array a) : data_(std::make_shared<Array>(std::move(a))) {}        // NOLINT(google-explicit-constructor)
  Value(Object o) : data_(std::make_shared<Object>(std::move(o))) {}      // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<Object> o) : data_(std::move(o)) {}               // NOLINT(google-explicit-constructor)
  Value(Callable c) : data_(std::make_shared<Callable>(std::move(c))) {}  // NOLINT(google-explicit-constructor)

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }
  bool is_callable() const { return kind() == Kind::callable; }
  bool is_tuple() const { return tuple_; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_double() const;  // int or float (or bool) as double
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const Array& as_array() const { return *std::get<std::shared_ptr<Array>>(data_); }
  const Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  Object& mutable_object() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  const std::string& undefined_name() const { return std::get<Undefined>(data_).name; }

  bool truthy() const;       // Python truthiness; undefined is false
  std::string str() const;   // Python str(); undefined prints as ""
  std::string repr() const;  // Python repr()
  // json.dumps(value, ensure_ascii=False, indent=indent) where indent < 0 means None.
  std::string to_json(int indent, bool sort_keys = false) const;
  bool equals(const Value& other) const;  // Python ==
  const char* type_name() const;

  // Converts JSON (any depth up to kMaxDepth; deeper fails) into a Value, keeping object key order.
  template <class Json>
  static Value from_json(const Json& json, int depth = 0);

 private:
  using Data = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<Array>,
                            std::shared_ptr<Object>, std::shared_ptr<Callable>>;
  explicit Value(Data data) : data_(std::move(data)) {}
  Data data_;
  bool tuple_ = false;
};

inline constexpr int kMaxJsonDepth = 256;

// Python-style ordering for <, <=, >, >=: numbers and strings (and lists of them); other pairs throw.
int compare_values(const Value& a, const Value& b);
// Number of Unicode code points in UTF-8 `s` (Python len()).
size_t utf8_length(std::string_view s);
// Byte offsets of each code point of `s`, plus s.size() at the end.
std::vector<size_t> utf8_offsets(std::string_view s);
std::string format_float(double d);  // Python repr of a float

template <class Json>
Value Value::from_json(const Json& json, int depth) {
  if (depth > kMaxJsonDepth) throw_error("input JSON nests deeper than " + std::to_string(kMaxJsonDepth));
  switch (json.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      if (json.template get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Value(static_cast<double>(json.template get<uint64_t>()));
      }
      return Value(static_cast<int64_t>(json.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Value(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(json.template get<std::string>());
    case nlohmann::json::value_t::binary:
      return Value::none();
    case nlohmann::json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(from_json(item, depth + 1));
      return Value(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Object object;
      for (auto it = json.begin(); it != json.end(); ++it) {
        object.items.emplace_back(it.key(), from_json(it.value(), depth + 1));
      }
      return Value(std::move(object));
    }
  }
  return Value::none();
}

}  // namespace hearth::tmpl

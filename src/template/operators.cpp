// Operators, attribute/item access, iteration, and the str/dict methods templates call (Python semantics).
#include <climits>
#include <cmath>
#include <cstdint>

#include "template/interpreter.h"
#include "template/strings.h"

namespace hearth::tmpl {
namespace {

[[noreturn]] void fail_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw_error("'" + a.undefined_name() + "' is undefined");
  if (b.is_undefined()) throw_error("'" + b.undefined_name() + "' is undefined");
  throw_error("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// "[key]", built by appends: GCC 12 warns falsely (-Wrestrict) about `"[" + s + "]"`.
std::string subscript_name(const std::string& key) {
  std::string name = "[";
  name += key;
  name += ']';
  return name;
}

bool is_numeric(const Value& v) {
  return v.is_number() || v.is_bool();
}
int64_t to_int(const Value& v) {
  return v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
}
bool both_ints(const Value& a, const Value& b) {
  return (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
}

Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value("") : Value(Array{});
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_array().size() * sizeof(Value);
  size_t total = 0;
  if (__builtin_mul_overflow(unit, static_cast<uint64_t>(times), &total)) total = SIZE_MAX;
  in.check_size(total);
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  Array out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_array().begin(), seq.as_array().end());
  return Value(std::move(out));
}

Value arithmetic(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array()) {
      Array out = a.as_array();
      out.insert(out.end(), b.as_array().begin(), b.as_array().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) return repeat(in, a, to_int(b));
    if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return repeat(in, b, to_int(a));
  }
  if (!is_numeric(a) || !is_numeric(b)) fail_operands(op, a, b);
  if (op == "/") {
    if (b.as_double() == 0) throw_error("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (both_ints(a, b)) {
    const int64_t x = to_int(a);
    const int64_t y = to_int(b);
    int64_t r = 0;
    // Python ints do not overflow; past int64 the result degrades to a float rather than wrapping.
    if (op == "+") return __builtin_add_overflow(x, y, &r) ? Value(double(x) + double(y)) : Value(r);
    if (op == "-") return __builtin_sub_overflow(x, y, &r) ? Value(double(x) - double(y)) : Value(r);
    if (op == "*") return __builtin_mul_overflow(x, y, &r) ? Value(double(x) * double(y)) : Value(r);
    if (op == "**") {
      const double p = std::pow(double(x), double(y));
      return (y >= 0 && std::fabs(p) < 9.2e18) ? Value(static_cast<int64_t>(p)) : Value(p);
    }
    if (y == 0) throw_error("integer division or modulo by zero");
    if (y == -1) return op == "//" ? (x == INT64_MIN ? Value(-double(x)) : Value(-x)) : Value(int64_t{0});
    const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);  // floor division
    return op == "//" ? Value(q) : Value(x - q * y);
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) throw_error("float division or modulo by zero");
  if (op == "//") return Value(std::floor(x / y));
  return Value(x - std::floor(x / y) * y);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) throw_error(std::string("'in <string>' requires a string, not ") + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_array()) {
    for (const Value& v : container.as_array()) {
      if (v.equals(item)) return true;
    }
    return false;
  }
  if (container.is_object()) return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
  if (container.is_undefined()) return false;
  throw_error(std::string("argument of type '") + container.type_name() + "' is not iterable");
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "<") return Value(compare_values(a, b) < 0);
  if (op == "<=") return Value(compare_values(a, b) <= 0);
  if (op == ">") return Value(compare_values(a, b) > 0);
  if (op == ">=") return Value(compare_values(a, b) >= 0);
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  if (op == "~") {
    std::string out = a.str();
    in.check_size(out.size() + b.str().size());
    return Value(out + b.str());
  }
  return arithmetic(in, op, a, b);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_object() && key.is_string()) {
    if (const Value* v = object.as_object().find(key.as_string())) return *v;
    return get_attr(object, key.as_string());
  }
  if ((object.is_array() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
    if (object.is_array()) {
      const auto n = static_cast<int64_t>(object.as_array().size());
      if (i < 0) i += n;
      return (i >= 0 && i < n) ? object.as_array()[i] : Value::undefined(subscript_name(std::to_string(i)));
    }
    const std::vector<size_t> offsets = utf8_offsets(object.as_string());
    const auto n = static_cast<int64_t>(offsets.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(subscript_name(std::to_string(i)));
    return Value(object.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
  }
  if (key.is_string()) return get_attr(object, key.as_string());
  return Value::undefined(subscript_name(key.str()));
}

Value get_attr(const Value& object, const std::string& name) {
  if (object.is_object()) {
    const Object& o = object.as_object();
    if (!o.is_namespace) {
      if (Value method = dict_method(object, name); !method.is_undefined()) return method;
    }
    if (const Value* v = o.find(name)) return *v;
    return Value::undefined(name);
  }
  if (object.is_string()) return string_method(object, name);
  return Value::undefined(name);
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::array:
      return value.as_array();
    case Value::Kind::object: {
      std::vector<Value> keys;
      for (const auto& [k, v] : value.as_object().items) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::string: {
      const std::string& s = value.as_string();
      const std::vector<size_t> offsets = utf8_offsets(s);
      std::vector<Value> chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i)
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      return chars;
    }
    case Value::Kind::undefined:
      return {};
    default:
      throw_error(std::string("'") + value.type_name() + "' object is not iterable");
  }
}

}  // namespace hearth::tmpl

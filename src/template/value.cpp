#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hearth::tmpl {

void throw_error(std::string message) {
  throw TemplateError{std::move(message)};
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(std::string_view name, size_t index) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(data_);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return as_bool();
    case Kind::integer:
      return as_int() != 0;
    case Kind::floating:
      return as_double() != 0.0;
    case Kind::string:
      return !as_string().empty();
    case Kind::array:
      return !as_array().empty();
    case Kind::object:
      return as_object().is_namespace || !as_object().items.empty();
    case Kind::callable:
      return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python's repr: the shortest round-trip digits, in positional form when -4 <= exponent < 16.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  if (exponent < -4 || exponent >= 16) return sci;
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out = negative ? "-" : "";
  if (exponent < 0) return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const auto int_digits = static_cast<size_t>(exponent + 1);
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

static std::string python_repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::undefined:
      return "";
    case Kind::string:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::undefined:
      return "";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return as_bool() ? "True" : "False";
    case Kind::integer:
      return std::to_string(as_int());
    case Kind::floating:
      return format_float(as_double());
    case Kind::string:
      return python_repr_string(as_string());
    case Kind::array: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < as_array().size(); ++i) out += (i ? ", " : "") + as_array()[i].repr();
      if (!tuple_) return out + "]";
      return out + (as_array().size() == 1 ? ",)" : ")");
    }
    case Kind::object: {
      std::string out = as_object().is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : as_object().items) {
        out += (first ? "" : ", ") + python_repr_string(k) + ": " + v.repr();
        first = false;
      }
      return out + (as_object().is_namespace ? "}>" : "}");
    }
    case Kind::callable:
      return "<function " + as_callable().name + ">";
  }
  return "";
}

static void json_escape(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

static void to_json_into(const Value& v, int indent, bool sort_keys, int level, std::string& out) {
  if (level > kMaxJsonDepth) throw_error("tojson: value nests too deeply");
  const auto newline = [&](int lvl) {
    if (indent >= 0) out += '\n' + std::string(static_cast<size_t>(indent * lvl), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      out += "null";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::floating: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : format_float(d);
      return;
    }
    case Value::Kind::string:
      json_escape(v.as_string(), out);
      return;
    case Value::Kind::array: {
      const Array& items = v.as_array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        to_json_into(items[i], indent, sort_keys, level + 1, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::object: {
      auto items = v.as_object().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_escape(items[i].first, out);
        out += ": ";
        to_json_into(items[i].second, indent, sort_keys, level + 1, out);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::callable:
      throw_error("tojson: a function is not JSON serializable");
  }
}

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  to_json_into(*this, indent, sort_keys, 0, out);
  return out;
}

bool Value::equals(const Value& other) const {
  if (is_number() || is_bool()) {
    if (!(other.is_number() || other.is_bool())) return false;
    if ((is_int() || is_bool()) && (other.is_int() || other.is_bool())) {
      const int64_t a = is_bool() ? as_bool() : as_int();
      const int64_t b = other.is_bool() ? other.as_bool() : other.as_int();
      return a == b;
    }
    return as_double() == other.as_double();
  }
  if (kind() != other.kind() || tuple_ != other.tuple_) return false;
  switch (kind()) {
    case Kind::undefined:
    case Kind::none:
      return true;
    case Kind::string:
      return as_string() == other.as_string();
    case Kind::array: {
      const Array& a = as_array();
      const Array& b = other.as_array();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case Kind::object: {
      const Object& a = as_object();
      const Object& b = other.as_object();
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [k, v] : a.items) {
        const Value* w = b.find(k);
        if (w == nullptr || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::callable:
      return &as_callable() == &other.as_callable();
    default:
      return false;
  }
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::undefined:
      return "undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::array:
      return "list";
    case Kind::object:
      return "dict";
    case Kind::callable:
      return "function";
  }
  return "?";
}

int compare_values(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_double();
    const double y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_array() && b.is_array()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (const int c = compare_values(x[i], y[i]); c != 0) return c;
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw_error(std::string("cannot compare ") + a.type_name() + " with " + b.type_name());
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace hearth::tmpl

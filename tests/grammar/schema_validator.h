#pragma once
// The tests' own JSON Schema validator for the subset the grammar compiles, written from the specification and
// independent of the grammar: `pattern` through std::regex (ECMAScript, searched, as JSON Schema says), formats by
// parsing (a date's day against its month and leap year, a time's fields, a uuid's hex groups, an email's parts).

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>
#include <string>

namespace hearth::test {

using nlohmann::json;

inline size_t schema_code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// UTF-8 to code points (wchar_t is 32 bits here), so std::wregex's `.` and classes see characters, not bytes.
inline std::wstring widen(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? b : b & (0x3F >> (len - 1));
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out.push_back(static_cast<wchar_t>(cp));
    i += len;
  }
  return out;
}

inline bool all_of_class(const std::string& s, size_t from, size_t to, const char* klass) {
  if (to > s.size()) return false;
  for (size_t i = from; i < to; ++i) {
    if (std::string_view(klass).find(s[i]) == std::string_view::npos) return false;
  }
  return true;
}

inline bool valid_date(const std::string& s) {
  constexpr const char* kDigits = "0123456789";
  if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !all_of_class(s, 0, 4, kDigits) ||
      !all_of_class(s, 5, 7, kDigits) || !all_of_class(s, 8, 10, kDigits)) {
    return false;
  }
  const int y = std::stoi(s.substr(0, 4));
  const int m = std::stoi(s.substr(5, 2));
  const int d = std::stoi(s.substr(8, 2));
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

inline bool valid_time(const std::string& s) {  // RFC 3339 full-time: the offset is required
  static const std::regex re(R"(^([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|z|[+-]([0-9]{2}):([0-9]{2}))$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 59) return false;
  return !m[6].matched || (std::stoi(m[6]) <= 23 && std::stoi(m[7]) <= 59);
}

inline bool valid_format(const std::string& s, const std::string& format) {
  if (format == "date") return valid_date(s);
  if (format == "time") return valid_time(s);
  if (format == "date-time") {
    const size_t t = s.find_first_of("Tt");
    return t == 10 && valid_date(s.substr(0, 10)) && valid_time(s.substr(11));
  }
  if (format == "uuid") {
    static const std::regex re("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
    return std::regex_match(s, re);
  }
  if (format == "email") {  // ajv-formats' email, as a reference
    static const std::regex re(
        "^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+"
        "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
        std::regex::icase);
    return std::regex_match(s, re);
  }
  if (format == "ipv4") {
    static const std::regex re(
        R"(^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$)");
    return std::regex_match(s, re);
  }
  return false;
}

inline const json& resolve_ref(const json& root, const std::string& ref) {
  if (ref == "#") return root;
  return root.at(json::json_pointer(ref.substr(1)));
}

inline bool validates_schema(const json& v, const json& schema, const json& root);

inline bool validates_number(const json& v, const json& s) {
  const double x = v.get<double>();
  auto bound = [&](const char* key, auto ok) {
    return !s.contains(key) || s[key].is_boolean() || ok(s[key].get<double>());
  };
  const bool draft4_min = s.value("exclusiveMinimum", json(false)) == json(true);
  const bool draft4_max = s.value("exclusiveMaximum", json(false)) == json(true);
  if (!bound("minimum", [&](double m) { return draft4_min ? x > m : x >= m; })) return false;
  if (!bound("maximum", [&](double m) { return draft4_max ? x < m : x <= m; })) return false;
  if (!bound("exclusiveMinimum", [&](double m) { return x > m; })) return false;
  if (!bound("exclusiveMaximum", [&](double m) { return x < m; })) return false;
  if (s.contains("multipleOf")) {
    const double q = x / s["multipleOf"].get<double>();
    if (q != std::floor(q)) return false;
  }
  return true;
}

inline bool validates_schema(const json& v, const json& schema, const json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref") && !validates_schema(v, resolve_ref(root, schema["$ref"]), root)) return false;
  if (schema.value("nullable", false) && v.is_null()) return true;
  if (schema.contains("anyOf")) {
    bool any = false;
    for (const json& s : schema["anyOf"]) any |= validates_schema(v, s, root);
    if (!any) return false;
  }
  if (schema.contains("oneOf")) {
    int n = 0;
    for (const json& s : schema["oneOf"]) n += validates_schema(v, s, root) ? 1 : 0;
    if (n != 1) return false;
  }
  if (schema.contains("allOf")) {
    for (const json& s : schema["allOf"]) {
      if (!validates_schema(v, s, root)) return false;
    }
  }
  if (schema.contains("const") && v != schema["const"]) return false;
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found |= e == v;
    if (!found) return false;
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const json& t : types) {
      ok |= (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
            (t == "number" && v.is_number()) || (t == "integer" && v.is_number_integer()) ||
            (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
    }
    if (!ok) return false;
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [k, x] : v.items()) {
      if (schema.contains("propertyNames") && !validates_schema(json(k), schema["propertyNames"], root)) return false;
      if (props.contains(k)) {
        if (!validates_schema(x, props[k], root)) return false;
      } else if (!validates_schema(x, schema.value("additionalProperties", json(true)), root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < schema.value("minItems", 0u) || v.size() > schema.value("maxItems", 1u << 30)) return false;
    if (schema.contains("items")) {
      for (const json& x : v) {
        if (!validates_schema(x, schema["items"], root)) return false;
      }
    }
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const size_t n = schema_code_points(s);
    if (n < schema.value("minLength", 0u) || n > schema.value("maxLength", 1u << 30)) return false;
    if (schema.contains("pattern") && !std::regex_search(widen(s), std::wregex(widen(schema["pattern"])))) {
      return false;
    }
    if (schema.contains("format") && !valid_format(s, schema["format"])) return false;
  }
  if (v.is_number() && !validates_number(v, schema)) return false;
  return true;
}

inline bool validates_schema(const json& v, const json& schema) {
  return validates_schema(v, schema, schema);
}

}  // namespace hearth::test

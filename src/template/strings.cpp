#include "template/strings.h"

#include <cctype>

#include "template/interpreter.h"

namespace hearth::tmpl {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

const std::string& string_arg(const CallArgs& args, std::string_view name, size_t index, const char* method) {
  const Value* v = args.get(name, index);
  if (v == nullptr || !v->is_string()) throw_error(std::string(method) + "() needs a string argument");
  return v->as_string();
}

int64_t int_arg(const CallArgs& args, std::string_view name, size_t index, int64_t fallback) {
  const Value* v = args.get(name, index);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int()) throw_error("expected an integer argument '" + std::string(name) + "'");
  return v->as_int();
}

// startswith/endswith accept a string or a tuple of strings.
bool affix_match(const std::string& s, const CallArgs& args, bool prefix) {
  const Value* v = args.get("prefix", 0);
  if (v == nullptr) throw_error(std::string(prefix ? "startswith" : "endswith") + "() needs an argument");
  std::vector<Value> options = v->is_array() ? v->as_array() : std::vector<Value>{*v};
  for (const Value& option : options) {
    if (!option.is_string()) throw_error("startswith/endswith arguments must be strings");
    const std::string& a = option.as_string();
    if (a.size() > s.size()) continue;
    if (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

Value call_string_method(const std::string& name, const std::string& s, const CallArgs& args) {
  if (name == "strip") return Value(py_strip(s, true, true, args.get("chars", 0)));
  if (name == "lstrip") return Value(py_strip(s, true, false, args.get("chars", 0)));
  if (name == "rstrip") return Value(py_strip(s, false, true, args.get("chars", 0)));
  if (name == "upper") return Value(ascii_upper(s));
  if (name == "lower") return Value(ascii_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "startswith") return Value(affix_match(s, args, true));
  if (name == "endswith") return Value(affix_match(s, args, false));
  if (name == "split") {
    Array parts;
    for (std::string& p : py_split(s, args.get("sep", 0), int_arg(args, "maxsplit", 1, -1))) parts.emplace_back(p);
    return Value(std::move(parts));
  }
  if (name == "replace") {
    return Value(py_replace(s, string_arg(args, "old", 0, "replace"), string_arg(args, "new", 1, "replace"),
                            int_arg(args, "count", 2, -1)));
  }
  if (name == "find") {
    const size_t at = s.find(string_arg(args, "sub", 0, "find"));
    return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, at))));
  }
  if (name == "count") {
    const std::string& sub = string_arg(args, "sub", 0, "count");
    if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* items = args.get("iterable", 0);
    std::string out;
    if (items != nullptr && items->is_array()) {
      for (size_t i = 0; i < items->as_array().size(); ++i) out += (i ? s : "") + items->as_array()[i].str();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    if (s.empty()) return Value(false);
    for (unsigned char c : s) {
      const bool ok = name == "isdigit"   ? std::isdigit(c)
                      : name == "isspace" ? std::isspace(c)
                      : name == "isalpha" ? std::isalpha(c)
                                          : std::isalnum(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  return Value::undefined(name);
}

bool is_string_method(const std::string& name) {
  static constexpr std::string_view kNames[] = {
      "strip", "lstrip",  "rstrip", "upper", "lower", "title",   "capitalize", "startswith", "endswith",
      "split", "replace", "find",   "count", "join",  "isdigit", "isspace",    "isalpha",    "isalnum"};
  for (std::string_view n : kNames) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

std::string py_strip(std::string_view s, bool left, bool right, const Value* chars) {
  std::string_view set = kWhitespace;
  if (chars != nullptr && chars->is_string()) set = chars->as_string();
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end && set.find(s[begin]) != std::string_view::npos) ++begin;
  }
  if (right) {
    while (end > begin && set.find(s[end - 1]) != std::string_view::npos) --end;
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr || sep->is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && kWhitespace.find(s[i]) != std::string_view::npos) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(py_strip(s.substr(i), false, true, nullptr));
        break;
      }
      size_t j = i;
      while (j < s.size() && kWhitespace.find(s[j]) == std::string_view::npos) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  if (!sep->is_string()) throw_error("split() separator must be a string");
  const std::string& d = sep->as_string();
  if (d.empty()) throw_error("split(): empty separator");
  size_t start = 0;
  for (size_t at = s.find(d); at != std::string::npos; at = s.find(d, start)) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    parts.push_back(s.substr(start, at - start));
    start = at + d.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;  // Python would interleave `to`; no template relies on that
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  for (size_t at = s.find(from); at != std::string::npos && (count < 0 || done < count); at = s.find(from, start)) {
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string py_title(std::string s) {
  bool prev_letter = false;
  for (char& c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) c = prev_letter ? ascii_lower(std::string(1, c))[0] : ascii_upper(std::string(1, c))[0];
    prev_letter = letter;
  }
  return s;
}

std::string py_capitalize(std::string s) {
  s = ascii_lower(std::move(s));
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

Value string_method(const Value& self, const std::string& name) {
  if (!is_string_method(name)) return Value::undefined(name);
  return Value(Callable{"str." + name, [self, name](Interpreter&, const CallArgs& args) -> Value {
                          return call_string_method(name, self.as_string(), args);
                        }});
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value(
        Callable{"dict." + name, [self, name](Interpreter&, const CallArgs&) -> Value {
                   Array out;
                   for (const auto& [k, v] : self.as_object().items) {
                     out.push_back(name == "items" ? Value::tuple(Array{Value(k), v}) : name == "keys" ? Value(k) : v);
                   }
                   return Value(std::move(out));
                 }});
  }
  if (name == "get") {
    return Value(Callable{"dict.get", [self](Interpreter&, const CallArgs& args) -> Value {
                            const Value* key = args.get("key", 0);
                            const Value* fallback = args.get("default", 1);
                            if (key != nullptr && key->is_string()) {
                              if (const Value* v = self.as_object().find(key->as_string())) return *v;
                            }
                            return fallback != nullptr ? *fallback : Value::none();
                          }});
  }
  return Value::undefined(name);
}

}  // namespace hearth::tmpl

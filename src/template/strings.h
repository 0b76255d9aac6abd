#pragma once
// Python str helpers and the bound methods templates call on strings and dicts.

#include <string>
#include <string_view>
#include <vector>

#include "template/value.h"

namespace hearth::tmpl {

std::string py_strip(std::string_view s, bool left, bool right, const Value* chars);  // chars: none = whitespace
std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string py_title(std::string s);
std::string py_capitalize(std::string s);

// A bound method of a string (strip, split, startswith, ...), or undefined when there is no such method.
Value string_method(const Value& self, const std::string& name);
// A bound method of a dict (items, keys, values, get), or undefined when there is no such method.
Value dict_method(const Value& self, const std::string& name);

}  // namespace hearth::tmpl

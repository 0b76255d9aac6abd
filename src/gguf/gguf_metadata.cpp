// GgufFile's typed metadata lookups and the human-readable rendering of values.

#include <cmath>
#include <limits>

#include "gguf/gguf_file.h"

namespace hearth {
namespace {

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 || t == GgufType::UINT64;
}
bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 || t == GgufType::INT64;
}
bool is_float(GgufType t) {
  return t == GgufType::FLOAT32 || t == GgufType::FLOAT64;
}

Error wrong_type(const std::string& file, std::string_view key, const GgufValue& value, std::string_view wanted) {
  std::string stored(gguf_type_name(value.type));
  if (value.type == GgufType::ARRAY) {
    stored = fmt::format("ARRAY of {}", gguf_type_name(std::get<std::shared_ptr<GgufArray>>(value.data)->elem_type));
  }
  return make_error("{}: metadata key '{}' has type {}, expected {}", file, key, stored, wanted);
}

// The array behind `key`, or an error when the key holds something else. Missing key: nullptr.
Result<const GgufArray*> find_array(const GgufFile& file, std::string_view key, std::string_view wanted) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return static_cast<const GgufArray*>(nullptr);
  if (value->type != GgufType::ARRAY) return wrong_type(file.name(), key, *value, wanted);
  return static_cast<const GgufArray*>(std::get<std::shared_ptr<GgufArray>>(value->data).get());
}

std::string quote(std::string_view s, size_t max_chars) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_chars) out += "...";
  return out + "\"";
}

}  // namespace

Result<std::optional<uint64_t>> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::optional<uint64_t>();
  if (is_unsigned(value->type)) return std::optional<uint64_t>(std::get<uint64_t>(value->data));
  if (is_signed(value->type)) {
    int64_t v = std::get<int64_t>(value->data);
    if (v < 0) return make_error("{}: metadata key '{}' is {}, expected a non-negative integer", name_, key, v);
    return std::optional<uint64_t>(static_cast<uint64_t>(v));
  }
  return wrong_type(name_, key, *value, "an integer");
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::optional<double>();
  if (is_float(value->type)) return std::optional<double>(std::get<double>(value->data));
  return wrong_type(name_, key, *value, "FLOAT32 or FLOAT64");
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::optional<std::string>();
  if (value->type == GgufType::STRING) return std::optional<std::string>(std::get<std::string>(value->data));
  return wrong_type(name_, key, *value, "STRING");
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::optional<bool>();
  if (value->type == GgufType::BOOL) return std::optional<bool>(std::get<bool>(value->data));
  return wrong_type(name_, key, *value, "BOOL");
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  auto array = find_array(*this, key, "ARRAY of STRING");
  if (!array) return array.error();
  std::vector<std::string> out;
  if (*array == nullptr) return out;
  if ((*array)->elem_type != GgufType::STRING) return wrong_type(name_, key, *find(key), "ARRAY of STRING");
  out.reserve((*array)->items.size());
  for (const GgufValue& item : (*array)->items) out.push_back(std::get<std::string>(item.data));
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  auto array = find_array(*this, key, "ARRAY of FLOAT32");
  if (!array) return array.error();
  std::vector<float> out;
  if (*array == nullptr) return out;
  if (!is_float((*array)->elem_type)) return wrong_type(name_, key, *find(key), "ARRAY of FLOAT32 or FLOAT64");
  out.reserve((*array)->items.size());
  for (const GgufValue& item : (*array)->items) out.push_back(static_cast<float>(std::get<double>(item.data)));
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  auto array = find_array(*this, key, "ARRAY of integers");
  if (!array) return array.error();
  std::vector<int64_t> out;
  if (*array == nullptr) return out;
  GgufType elem = (*array)->elem_type;
  if (!is_unsigned(elem) && !is_signed(elem)) return wrong_type(name_, key, *find(key), "ARRAY of integers");
  out.reserve((*array)->items.size());
  for (size_t i = 0; i < (*array)->items.size(); ++i) {
    const GgufValue& item = (*array)->items[i];
    if (is_signed(elem)) {
      out.push_back(std::get<int64_t>(item.data));
      continue;
    }
    uint64_t v = std::get<uint64_t>(item.data);
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return make_error("{}: metadata key '{}' item {} is {}, too large for int64", name_, key, i, v);
    }
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

std::string gguf_value_to_string(const GgufValue& value, size_t max_items) {
  constexpr size_t kMaxStringChars = 120;
  if (const auto* u = std::get_if<uint64_t>(&value.data)) return fmt::format("{}", *u);
  if (const auto* i = std::get_if<int64_t>(&value.data)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&value.data)) {
    // FLOAT32 values print with float precision so 1e-5f reads as 1e-05, not 9.99999974737875e-06.
    if (value.type == GgufType::FLOAT32) return fmt::format("{}", static_cast<float>(*d));
    return fmt::format("{}", *d);
  }
  if (const auto* b = std::get_if<bool>(&value.data)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&value.data)) return quote(*s, kMaxStringChars);
  const GgufArray& array = *std::get<std::shared_ptr<GgufArray>>(value.data);
  std::string out = "[";
  for (size_t i = 0; i < array.items.size() && i < max_items; ++i) {
    if (i > 0) out += ", ";
    out += gguf_value_to_string(array.items[i], max_items);
  }
  if (array.items.size() > max_items) {
    out += fmt::format(", ... ({} {} items)", array.items.size(), gguf_type_name(array.elem_type));
  }
  return out + "]";
}

}  // namespace hearth

#include "gguf/describe.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace hearth {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

// Appends `rows` as "key  value" lines with the values in one column.
void append_rows(std::string& out, const Rows& rows, std::string_view indent) {
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  for (const auto& [key, value] : rows) out += fmt::format("{}{:<{}}  {}\n", indent, key, width, value);
}

std::string value_or_dash(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return "-";
  if (const auto* s = std::get_if<std::string>(&value->data)) return *s;
  return gguf_value_to_string(*value);
}

std::string describe_tensors(const GgufFile& file) {
  std::map<std::string_view, std::pair<size_t, uint64_t>> by_type;  // name -> (count, bytes)
  for (const GgufTensor& t : file.tensors()) {
    auto& entry = by_type[dtype_name(t.type)];
    entry.first += 1;
    entry.second += t.nbytes;
  }
  std::vector<std::pair<std::string_view, std::pair<size_t, uint64_t>>> sorted(by_type.begin(), by_type.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string out = fmt::format("{}", file.tensors().size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    out += fmt::format("{} {} {} ({})", i == 0 ? ":" : ",", sorted[i].second.first, sorted[i].first,
                       format_bytes(sorted[i].second.second));
  }
  return out;
}

std::string describe_tokenizer(const GgufFile& file) {
  const GgufValue* model = file.find("tokenizer.ggml.model");
  if (model == nullptr) return "-";
  std::string out = value_or_dash(file, "tokenizer.ggml.model");
  if (file.find("tokenizer.ggml.pre") != nullptr)
    out += fmt::format(" (pre {})", value_or_dash(file, "tokenizer.ggml.pre"));
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens != nullptr && tokens->type == GgufType::ARRAY) {
    out += fmt::format(", {} tokens", std::get<std::shared_ptr<GgufArray>>(tokens->data)->items.size());
  }
  for (std::string_view special : {"bos", "eos", "unknown", "padding"}) {
    auto id = file.get_uint(fmt::format("tokenizer.ggml.{}_token_id", special));
    // Converters write UINT32_MAX for "no such token".
    if (id && id->has_value() && **id != 0xffffffffu) out += fmt::format(", {} {}", special, **id);
  }
  if (const GgufValue* tmpl = file.find("tokenizer.chat_template"); tmpl != nullptr) {
    if (const auto* s = std::get_if<std::string>(&tmpl->data))
      out += fmt::format(", chat template {} chars", s->size());
  }
  return out;
}

// llama.cpp's LLAMA_FTYPE names for `general.file_type`.
const std::map<uint64_t, std::string_view>& file_type_names() {
  static const std::map<uint64_t, std::string_view> kNames = {
      {0, "ALL_F32"},        {1, "MOSTLY_F16"},        {2, "MOSTLY_Q4_0"},    {3, "MOSTLY_Q4_1"},
      {7, "MOSTLY_Q8_0"},    {8, "MOSTLY_Q5_0"},       {9, "MOSTLY_Q5_1"},    {10, "MOSTLY_Q2_K"},
      {11, "MOSTLY_Q3_K_S"}, {12, "MOSTLY_Q3_K_M"},    {13, "MOSTLY_Q3_K_L"}, {14, "MOSTLY_Q4_K_S"},
      {15, "MOSTLY_Q4_K_M"}, {16, "MOSTLY_Q5_K_S"},    {17, "MOSTLY_Q5_K_M"}, {18, "MOSTLY_Q6_K"},
      {32, "MOSTLY_BF16"},   {38, "MOSTLY_MXFP4_MOE"},
  };
  return kNames;
}

std::string describe_file_type(const GgufFile& file) {
  auto type = file.get_uint("general.file_type");
  if (!type || !type->has_value()) return value_or_dash(file, "general.file_type");
  auto it = file_type_names().find(**type);
  return it == file_type_names().end() ? fmt::format("{}", **type) : fmt::format("{} ({})", **type, it->second);
}

Rows hyperparameters(const GgufFile& file, const std::string& arch) {
  Rows rows;
  if (arch.empty()) return rows;
  std::string prefix = arch + ".";
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with(prefix)) rows.emplace_back(key.substr(prefix.size()), gguf_value_to_string(value));
  }
  return rows;
}

}  // namespace

std::string format_count(uint64_t count) {
  static constexpr const char* kUnits[] = {"", "K", "M", "B", "T"};
  double v = static_cast<double>(count);
  size_t unit = 0;
  while (v >= 1000.0 && unit + 1 < std::size(kUnits)) {
    v /= 1000.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{}", count);
  return fmt::format("{:.{}f}{}", v, v < 10 ? 2 : v < 100 ? 1 : 0, kUnits[unit]);
}

GgufSummary summarize_gguf(const GgufFile& file) {
  GgufSummary out;
  if (auto arch = file.get_string("general.architecture"); arch && arch->has_value()) out.architecture = **arch;
  for (const GgufTensor& t : file.tensors()) out.num_params += static_cast<uint64_t>(t.num_elements());
  if (auto type = file.get_uint("general.file_type"); type && type->has_value()) {
    if (auto it = file_type_names().find(**type); it != file_type_names().end()) {
      std::string_view name = it->second;
      for (std::string_view prefix : {"MOSTLY_", "ALL_"}) {
        if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
      }
      out.file_type = std::string(name.substr(0, name.find("_MOE")));
    }
  }
  if (out.file_type.empty()) {  // the file does not say: the type most of its bytes have
    std::map<DType, size_t> bytes;
    for (const GgufTensor& t : file.tensors()) bytes[t.type] += t.nbytes;
    const auto most =
        std::max_element(bytes.begin(), bytes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (most != bytes.end()) out.file_type = std::string(dtype_name(most->first));
  }
  return out;
}

std::string describe_gguf(const GgufFile& file) {
  uint64_t params = 0;
  for (const GgufTensor& t : file.tensors()) params += static_cast<uint64_t>(t.num_elements());
  std::string arch = value_or_dash(file, "general.architecture");
  Rows rows = {
      {"file", file.name()},
      {"format",
       fmt::format("GGUF v{}, alignment {}, data at byte {}", file.version(), file.alignment(), file.data_offset())},
      {"size", fmt::format("{} ({} bytes)", format_bytes(file.file_size()), file.file_size())},
      {"architecture", arch},
      {"name", value_or_dash(file, "general.name")},
      {"file type", describe_file_type(file)},
      {"parameters", fmt::format("{} ({})", format_count(params), params)},
      {"tensors", describe_tensors(file)},
      {"tokenizer", describe_tokenizer(file)},
  };
  std::string out;
  append_rows(out, rows, "");
  Rows hparams = hyperparameters(file, arch == "-" ? std::string() : arch);
  if (!hparams.empty()) {
    out += fmt::format("hyperparameters ({}.*)\n", arch);
    append_rows(out, hparams, "  ");
  }
  return out;
}

}  // namespace hearth

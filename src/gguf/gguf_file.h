#pragma once
// GgufFile: a parsed GGUF v2/v3 file. Metadata is decoded into values; tensor data stays in the mmap and
// tensors are views into it, never copies.
//
// File layout (little-endian):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv × (string key, u32 type, value)
//   | n_tensors × (string name, u32 n_dims, n_dims × u64 ne, u32 dtype, u64 offset) | pad to alignment | data
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements (arrays may nest).
//
// Parsing never reads out of bounds, never allocates more than the input can justify (every count is checked
// against the bytes that remain before anything is reserved), and rejects: a wrong magic; versions other than
// 2 and 3; truncation anywhere; strings or arrays running past the end; unknown value or tensor types; BOOL
// bytes other than 0/1; arrays nested deeper than 8; duplicate keys or tensor names; general.alignment that is
// not a nonzero power of two; n_dims outside 1..4; dimensions <= 0; element or byte counts overflowing 64 bits;
// rows that are not whole blocks; tensor offsets not aligned; tensor data past the end of the file.
// A file without tensors may end right after its metadata (vocabulary-only files do).
//
// Moving a GgufFile keeps every tensor view valid: the mmap (or the caller's bytes) does not move.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensor/dtype.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace hearth {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType type);

struct GgufValue;
struct GgufArray {
  GgufType elem_type = GgufType::UINT8;
  std::vector<GgufValue> items;
};

// One metadata value. Integers are widened to (u)int64, floats to double; `type` keeps the stored type.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> data;
};

struct GgufTensor {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension, as in GGML
  uint64_t offset = 0;           // relative to the data section
  size_t nbytes = 0;
  const uint8_t* data = nullptr;  // view into the mapped file

  int64_t num_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  GgufFile();  // an empty file: no metadata, no tensors
  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  // Maps and parses `path`. Every failure names the file, the byte offset and what was wrong.
  [[nodiscard]] static Result<GgufFile> open(const std::string& path);

  // Parses bytes already in memory (used by tests); `bytes` must outlive the returned file.
  [[nodiscard]] static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return bytes_.size(); }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& name() const { return name_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed lookups. Missing key: nullopt/empty result. Wrong type: an error naming key, stored and wanted type.
  [[nodiscard]] Result<std::optional<uint64_t>> get_uint(std::string_view key) const;  // any unsigned/signed >= 0
  [[nodiscard]] Result<std::optional<double>> get_float(std::string_view key) const;   // FLOAT32/FLOAT64
  [[nodiscard]] Result<std::optional<std::string>> get_string(std::string_view key) const;
  [[nodiscard]] Result<std::optional<bool>> get_bool(std::string_view key) const;
  [[nodiscard]] Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  [[nodiscard]] Result<std::vector<float>> get_float_array(std::string_view key) const;
  [[nodiscard]] Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // Bytes of all tensor data (the weights), from the header alone.
  size_t tensor_data_bytes() const {
    size_t n = 0;
    for (const GgufTensor& t : tensors_) n += t.nbytes;
    return n;
  }
  const GgufTensor* find_tensor(std::string_view name) const;
  // Drops the resident mapped pages of `range` (tensor data read once, e.g. hashed) when the file is mapped; a no-op
  // for caller-owned bytes, which are not file-backed (MappedFile::release_resident).
  void release_resident(std::span<const uint8_t> range) const { mapping_.release_resident(range); }

 private:
  MappedFile mapping_;  // empty when parsed from caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

// Renders a value for humans (arrays are summarized), e.g. for `hearth inspect`.
std::string gguf_value_to_string(const GgufValue& value, size_t max_items = 8);

}  // namespace hearth

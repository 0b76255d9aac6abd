#pragma once
// GgufWriter: builds a GGUF file (v3 by default) from metadata values and tensors whose bytes are produced on
// demand, so a multi-gigabyte model is written one tensor (or one row) at a time and never held in memory.
//
// Usage:
//   GgufWriter w;
//   w.add("general.architecture", gguf_string("llama"));
//   w.add_tensor({"output_norm.weight", DType::F32, {dim}, [&](GgufDataSink& sink) { return sink.write(bytes); }});
//   HEARTH_TRY(w.write_file(path));
//
// The layout written is exactly what GgufFile reads: header, metadata in insertion order, tensor infos in
// insertion order, zero padding to the alignment, then each tensor's data padded to the alignment.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace hearth {

inline constexpr uint64_t kGgufDefaultAlignment = 32;

// Value factories. The type must fit the factory (gguf_uint takes UINT8..UINT64, and so on); values that do not
// fit the stored type are rejected by GgufWriter::write_* with an error naming the key.
GgufValue gguf_uint(GgufType type, uint64_t value);  // UINT8, UINT16, UINT32, UINT64
GgufValue gguf_int(GgufType type, int64_t value);    // INT8, INT16, INT32, INT64
GgufValue gguf_float(GgufType type, double value);   // FLOAT32, FLOAT64
GgufValue gguf_u32(uint32_t value);
GgufValue gguf_f32(float value);
GgufValue gguf_bool(bool value);
GgufValue gguf_string(std::string value);
// An array; every item must have type `elem_type` (items may themselves be arrays).
GgufValue gguf_array(GgufType elem_type, std::vector<GgufValue> items);
GgufValue gguf_string_array(const std::vector<std::string>& items);

// Receives one tensor's bytes in as many pieces as the producer likes. The pieces must add up to exactly the
// tensor's size; more is an error from write(), fewer is an error from the writer after the fill returns.
class GgufDataSink {
 public:
  virtual ~GgufDataSink() = default;
  [[nodiscard]] virtual Result<void> write(std::span<const uint8_t> bytes) = 0;
};

// Produces a tensor's bytes into the sink. May fail (e.g. a read error); the failure is passed through.
using GgufTensorFill = std::function<Result<void>(GgufDataSink& sink)>;

struct GgufTensorSpec {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // ne order: shape[0] is the contiguous row; 1 to 4 dims, each > 0
  GgufTensorFill fill;
};

struct GgufWriterOptions {
  uint32_t version = 3;                        // 2 or 3: same layout (v3 added big-endian files; this writes little)
  uint64_t alignment = kGgufDefaultAlignment;  // nonzero power of two; if not 32 it is stored as general.alignment
};

class GgufWriter {
 public:
  explicit GgufWriter(GgufWriterOptions options = {}) : options_(options) {}

  // Appends a metadata entry. Keys must be unique and must not be general.alignment (set through the options);
  // violations are reported by write_*.
  void add(std::string key, GgufValue value);
  // Appends a tensor. Names must be unique; the shape must be valid for the type (rows a whole number of blocks).
  void add_tensor(GgufTensorSpec spec);

  // Validates everything, then writes the file. The bytes go to `path + ".partial"`, renamed to `path` on
  // success, so a failure never leaves a truncated file under the final name. Errors name the path and cause.
  [[nodiscard]] Result<void> write_file(const std::string& path) const;
  // Same layout into memory, for tests and small files.
  [[nodiscard]] Result<std::vector<uint8_t>> write_buffer() const;

  // Bytes before the data section (header + metadata + tensor infos + padding), once the inputs are valid.
  [[nodiscard]] Result<uint64_t> data_offset() const;

  class Output;  // where serialized bytes go (file or memory); defined in the .cpp

 private:
  [[nodiscard]] Result<void> validate() const;
  [[nodiscard]] Result<void> write_to(Output& out) const;
  std::vector<uint8_t> serialize_header() const;  // requires validate() to have passed
  [[nodiscard]] Result<void> write_tensor_data(Output& out, const GgufTensorSpec& spec) const;
  uint64_t tensor_nbytes(const GgufTensorSpec& spec) const;

  GgufWriterOptions options_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorSpec> tensors_;
};

}  // namespace hearth

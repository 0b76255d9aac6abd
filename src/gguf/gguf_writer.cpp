#include "gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

namespace hearth {

// Where the serialized bytes go: a file or a memory buffer.
class GgufWriter::Output {
 public:
  virtual ~Output() = default;
  [[nodiscard]] virtual Result<void> write(std::span<const uint8_t> bytes) = 0;
  uint64_t written() const { return written_; }

 protected:
  uint64_t written_ = 0;
};

namespace {

constexpr int kMaxArrayDepth = 8;  // as GgufFile accepts

class BufferOutput final : public GgufWriter::Output {
 public:
  Result<void> write(std::span<const uint8_t> bytes) override {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    written_ += bytes.size();
    return {};
  }
  std::vector<uint8_t>& buffer() { return buffer_; }

 private:
  std::vector<uint8_t> buffer_;
};

// Writes to `path.partial`; commit() closes and renames it to `path`. Destroyed uncommitted, it removes the
// partial file.
class FileOutput final : public GgufWriter::Output {
 public:
  explicit FileOutput(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {}
  FileOutput(const FileOutput&) = delete;
  FileOutput& operator=(const FileOutput&) = delete;
  ~FileOutput() override {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(partial_.c_str());
  }

  Result<void> open() {
    file_ = std::fopen(partial_.c_str(), "wb");
    if (file_ == nullptr) return make_error("{}: cannot create: {}", partial_, std::strerror(errno));
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    return {};
  }

  Result<void> write(std::span<const uint8_t> bytes) override {
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      return make_error("{}: write failed at byte {}: {}", partial_, written_, std::strerror(errno));
    }
    written_ += bytes.size();
    return {};
  }

  Result<void> commit() {
    int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) return make_error("{}: close failed: {}", partial_, std::strerror(errno));
    if (std::rename(partial_.c_str(), path_.c_str()) != 0) {
      return make_error("{}: cannot rename to {}: {}", partial_, path_, std::strerror(errno));
    }
    committed_ = true;
    return {};
  }

 private:
  std::string path_;
  std::string partial_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// Counts one tensor's bytes on their way to the output, so a fill that writes too much or too little is caught.
class TensorSink final : public GgufDataSink {
 public:
  TensorSink(GgufWriter::Output& out, const std::string& name, uint64_t expected)
      : out_(out), name_(name), expected_(expected) {}

  Result<void> write(std::span<const uint8_t> bytes) override {
    if (bytes.size() > expected_ - written_) {
      return make_error("tensor '{}': fill wrote {} bytes, more than the tensor's {}", name_, written_ + bytes.size(),
                        expected_);
    }
    written_ += bytes.size();
    return out_.write(bytes);
  }
  uint64_t written() const { return written_; }

 private:
  GgufWriter::Output& out_;
  const std::string& name_;
  uint64_t expected_;
  uint64_t written_ = 0;
};

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

template <class T>
void put(std::vector<uint8_t>& out, T value) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.insert(out.end(), raw, raw + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& value) {
  switch (value.type) {
    case GgufType::UINT8:
      return put<uint8_t>(out, static_cast<uint8_t>(std::get<uint64_t>(value.data)));
    case GgufType::INT8:
      return put<int8_t>(out, static_cast<int8_t>(std::get<int64_t>(value.data)));
    case GgufType::UINT16:
      return put<uint16_t>(out, static_cast<uint16_t>(std::get<uint64_t>(value.data)));
    case GgufType::INT16:
      return put<int16_t>(out, static_cast<int16_t>(std::get<int64_t>(value.data)));
    case GgufType::UINT32:
      return put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(value.data)));
    case GgufType::INT32:
      return put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(value.data)));
    case GgufType::UINT64:
      return put<uint64_t>(out, std::get<uint64_t>(value.data));
    case GgufType::INT64:
      return put<int64_t>(out, std::get<int64_t>(value.data));
    case GgufType::FLOAT32:
      return put<float>(out, static_cast<float>(std::get<double>(value.data)));
    case GgufType::FLOAT64:
      return put<double>(out, std::get<double>(value.data));
    case GgufType::BOOL:
      return put<uint8_t>(out, std::get<bool>(value.data) ? 1 : 0);
    case GgufType::STRING:
      return put_string(out, std::get<std::string>(value.data));
    case GgufType::ARRAY: {
      const GgufArray& array = *std::get<std::shared_ptr<GgufArray>>(value.data);
      put<uint32_t>(out, static_cast<uint32_t>(array.elem_type));
      put<uint64_t>(out, array.items.size());
      for (const GgufValue& item : array.items) put_value(out, item);
      return;
    }
  }
}

// Checks that the variant holds what `type` says and that integers fit their stored width.
Result<void> check_value(const GgufValue& value, std::string_view key, int depth) {
  auto bad = [&](std::string_view why) { return make_error("GGUF writer: metadata '{}': {}", key, why); };
  switch (value.type) {
    case GgufType::UINT8:
    case GgufType::UINT16:
    case GgufType::UINT32:
    case GgufType::UINT64: {
      const auto* v = std::get_if<uint64_t>(&value.data);
      if (v == nullptr) return bad("unsigned type without an unsigned value");
      uint64_t max = value.type == GgufType::UINT8    ? 0xff
                     : value.type == GgufType::UINT16 ? 0xffff
                     : value.type == GgufType::UINT32 ? 0xffffffff
                                                      : std::numeric_limits<uint64_t>::max();
      if (*v > max) return bad(fmt::format("{} does not fit {}", *v, gguf_type_name(value.type)));
      return {};
    }
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: {
      const auto* v = std::get_if<int64_t>(&value.data);
      if (v == nullptr) return bad("signed type without a signed value");
      int bits = value.type == GgufType::INT8    ? 8
                 : value.type == GgufType::INT16 ? 16
                 : value.type == GgufType::INT32 ? 32
                                                 : 64;
      if (bits < 64 && (*v < -(int64_t{1} << (bits - 1)) || *v >= (int64_t{1} << (bits - 1)))) {
        return bad(fmt::format("{} does not fit {}", *v, gguf_type_name(value.type)));
      }
      return {};
    }
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      return std::holds_alternative<double>(value.data) ? Result<void>() : bad("float type without a float value");
    case GgufType::BOOL:
      return std::holds_alternative<bool>(value.data) ? Result<void>() : bad("BOOL type without a bool value");
    case GgufType::STRING:
      return std::holds_alternative<std::string>(value.data) ? Result<void>() : bad("STRING type without a string");
    case GgufType::ARRAY: {
      const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&value.data);
      if (array == nullptr || *array == nullptr) return bad("ARRAY type without an array");
      if (depth >= kMaxArrayDepth) return bad(fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
      for (const GgufValue& item : (*array)->items) {
        if (item.type != (*array)->elem_type) return bad("array item type differs from the array's element type");
        HEARTH_TRY(check_value(item, key, depth + 1));
      }
      return {};
    }
  }
  return bad(fmt::format("unknown type {}", static_cast<uint32_t>(value.type)));
}

Result<void> check_tensor(const GgufTensorSpec& spec) {
  auto bad = [&](std::string_view why) { return make_error("GGUF writer: tensor '{}': {}", spec.name, why); };
  if (spec.shape.empty() || spec.shape.size() > 4)
    return bad(fmt::format("{} dimensions, expected 1 to 4", spec.shape.size()));
  int64_t elements = 1;
  for (int64_t ne : spec.shape) {
    if (ne <= 0) return bad(fmt::format("dimension {} is not positive", ne));
    if (__builtin_mul_overflow(elements, ne, &elements)) return bad("element count overflows");
  }
  const DTypeInfo& info = dtype_info(spec.type);
  if (spec.shape[0] % info.block_size != 0) {
    return bad(fmt::format("row of {} elements is not a multiple of the {} block size {}", spec.shape[0], info.name,
                           info.block_size));
  }
  uint64_t nbytes = static_cast<uint64_t>(spec.shape[0] / info.block_size) * info.block_bytes;
  for (size_t d = 1; d < spec.shape.size(); ++d) {
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(spec.shape[d]), &nbytes))
      return bad("byte size overflows");
  }
  if (!spec.fill) return bad("no fill function");
  return {};
}

}  // namespace

GgufValue gguf_uint(GgufType type, uint64_t value) {
  return GgufValue{type, value};
}
GgufValue gguf_int(GgufType type, int64_t value) {
  return GgufValue{type, value};
}
GgufValue gguf_float(GgufType type, double value) {
  return GgufValue{type, value};
}
GgufValue gguf_u32(uint32_t value) {
  return GgufValue{GgufType::UINT32, uint64_t{value}};
}
GgufValue gguf_f32(float value) {
  return GgufValue{GgufType::FLOAT32, double{value}};
}
GgufValue gguf_bool(bool value) {
  return GgufValue{GgufType::BOOL, value};
}
GgufValue gguf_string(std::string value) {
  return GgufValue{GgufType::STRING, std::move(value)};
}

GgufValue gguf_array(GgufType elem_type, std::vector<GgufValue> items) {
  auto array = std::make_shared<GgufArray>();
  array->elem_type = elem_type;
  array->items = std::move(items);
  return GgufValue{GgufType::ARRAY, std::move(array)};
}

GgufValue gguf_string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (const std::string& s : items) values.push_back(gguf_string(s));
  return gguf_array(GgufType::STRING, std::move(values));
}

void GgufWriter::add(std::string key, GgufValue value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(GgufTensorSpec spec) {
  tensors_.push_back(std::move(spec));
}

uint64_t GgufWriter::tensor_nbytes(const GgufTensorSpec& spec) const {
  uint64_t n = row_bytes(spec.type, spec.shape[0]);
  for (size_t d = 1; d < spec.shape.size(); ++d) n *= static_cast<uint64_t>(spec.shape[d]);
  return n;
}

Result<void> GgufWriter::validate() const {
  if (options_.version != 2 && options_.version != 3) {
    return make_error("GGUF writer: version {} is not writable (2 or 3)", options_.version);
  }
  if (!std::has_single_bit(options_.alignment) || options_.alignment > 0xffffffffu) {
    return make_error("GGUF writer: alignment {} is not a power of two that fits UINT32", options_.alignment);
  }
  std::set<std::string_view> keys;
  for (const auto& [key, value] : metadata_) {
    if (key == "general.alignment") return make_error("GGUF writer: set general.alignment through the options");
    if (!keys.insert(key).second) return make_error("GGUF writer: duplicate metadata key '{}'", key);
    HEARTH_TRY(check_value(value, key, 0));
  }
  std::set<std::string_view> names;
  uint64_t total = 0;
  for (const GgufTensorSpec& spec : tensors_) {
    if (!names.insert(spec.name).second) return make_error("GGUF writer: duplicate tensor name '{}'", spec.name);
    HEARTH_TRY(check_tensor(spec));
    uint64_t n = tensor_nbytes(spec);
    if (__builtin_add_overflow(total, align_up(n, options_.alignment), &total)) {
      return make_error("GGUF writer: tensor data size overflows 64 bits at '{}'", spec.name);
    }
  }
  return {};
}

std::vector<uint8_t> GgufWriter::serialize_header() const {
  std::vector<uint8_t> out;
  bool store_alignment = options_.alignment != kGgufDefaultAlignment;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, options_.version);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size() + (store_alignment ? 1 : 0));
  if (store_alignment) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(GgufType::UINT32));
    put<uint32_t>(out, static_cast<uint32_t>(options_.alignment));
  }
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(value.type));
    put_value(out, value);
  }
  uint64_t offset = 0;
  for (const GgufTensorSpec& spec : tensors_) {
    put_string(out, spec.name);
    put<uint32_t>(out, static_cast<uint32_t>(spec.shape.size()));
    for (int64_t ne : spec.shape) put<uint64_t>(out, static_cast<uint64_t>(ne));
    put<uint32_t>(out, static_cast<uint32_t>(spec.type));
    put<uint64_t>(out, offset);
    offset += align_up(tensor_nbytes(spec), options_.alignment);
  }
  out.resize(align_up(out.size(), options_.alignment), 0);
  return out;
}

Result<uint64_t> GgufWriter::data_offset() const {
  HEARTH_TRY(validate());
  return static_cast<uint64_t>(serialize_header().size());
}

Result<void> GgufWriter::write_tensor_data(Output& out, const GgufTensorSpec& spec) const {
  uint64_t nbytes = tensor_nbytes(spec);
  TensorSink sink(out, spec.name, nbytes);
  HEARTH_TRY(spec.fill(sink));
  if (sink.written() != nbytes) {
    return make_error("tensor '{}': fill wrote {} bytes, the tensor has {}", spec.name, sink.written(), nbytes);
  }
  static constexpr uint8_t kZeros[256] = {};
  uint64_t pad = align_up(nbytes, options_.alignment) - nbytes;
  while (pad > 0) {
    uint64_t n = std::min<uint64_t>(pad, sizeof(kZeros));
    HEARTH_TRY(out.write({kZeros, n}));
    pad -= n;
  }
  return {};
}

Result<void> GgufWriter::write_to(Output& out) const {
  HEARTH_TRY(validate());
  HEARTH_TRY(out.write(serialize_header()));
  for (const GgufTensorSpec& spec : tensors_) HEARTH_TRY(write_tensor_data(out, spec));
  return {};
}

Result<void> GgufWriter::write_file(const std::string& path) const {
  HEARTH_TRY(validate());
  FileOutput out(path);
  HEARTH_TRY(out.open());
  auto written = write_to(out);
  if (!written) return make_error("{}: {}", path, written.error().message);
  return out.commit();
}

Result<std::vector<uint8_t>> GgufWriter::write_buffer() const {
  BufferOutput out;
  HEARTH_TRY(write_to(out));
  return std::move(out.buffer());
}

}  // namespace hearth

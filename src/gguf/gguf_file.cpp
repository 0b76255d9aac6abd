#include "gguf/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

namespace hearth {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is read by memcpy; a big-endian host needs swaps");

constexpr uint32_t kGgufMagic = 0x46554747;                  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;                            // arrays of arrays nest at most this deep
constexpr int kMaxDims = 4;                                  // GGML_MAX_DIMS
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, smallest value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, one dim, type, offset

bool is_known_type(uint32_t raw) {
  return raw <= static_cast<uint32_t>(GgufType::FLOAT64);
}

// Bytes one element of `type` occupies at least; arrays are checked against it before memory is reserved.
uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING:  // u64 length
      return 8;
    case GgufType::ARRAY:  // u32 type + u64 count
      return 12;
  }
  return 1;
}

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 || t == GgufType::UINT64;
}
bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 || t == GgufType::INT64;
}

// Reads little-endian fields from a byte span. Every read is bounds-checked; a failure names the file, the
// byte offset, the field being read and the context the parser set (which metadata key or tensor).
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  // Names what is being read, for error messages; formatted only when an error happens. `name` must stay valid
  // until the next call.
  void set_context(const char* kind, uint64_t index = 0, std::string_view name = {}) {
    context_kind_ = kind;
    context_index_ = index;
    context_name_ = name;
  }

  template <class T>
  Result<T> read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // Consumes `n` bytes the caller has already checked are there.
  const uint8_t* take(size_t n) {
    HEARTH_CHECK(n <= remaining(), "take({}) with {} bytes remaining", n, remaining());
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  // The u64 at the cursor without consuming it; requires 8 bytes remaining.
  uint64_t peek_u64() const {
    HEARTH_CHECK(remaining() >= 8, "peek past end");
    uint64_t v;
    std::memcpy(&v, bytes_.data() + pos_, 8);
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    size_t at = pos_;
    auto length = read<uint64_t>(what);
    if (!length) return length.error();
    if (*length > remaining()) {
      return error_at(at, "{} length {} runs past end of file ({} bytes remain)", what, *length, remaining());
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), *length);
    pos_ += *length;
    return s;
  }

  // An error at byte `at`, with the parser's current context appended.
  template <class... Args>
  Error error_at(size_t at, fmt::format_string<Args...> format, Args&&... args) const {
    std::string what = fmt::format(format, std::forward<Args>(args)...);
    if (context_kind_ == nullptr) return make_error("{}: at byte {}: {}", file_, at, what);
    if (context_name_.empty())
      return make_error("{}: at byte {}: {} (in {} {})", file_, at, what, context_kind_, context_index_);
    return make_error("{}: at byte {}: {} (in {} {} '{}')", file_, at, what, context_kind_, context_index_,
                      context_name_);
  }

 private:
  Error truncated(std::string_view what, size_t need) const {
    return error_at(pos_, "file truncated: {} needs {} bytes, {} remain (file is {} bytes)", what, need, remaining(),
                    bytes_.size());
  }

  std::span<const uint8_t> bytes_;
  const std::string& file_;
  const char* context_kind_ = nullptr;
  uint64_t context_index_ = 0;
  std::string_view context_name_;
  size_t pos_ = 0;
};

template <class Stored, class Wide>
Result<GgufValue> read_scalar(Cursor& cur, GgufType type, std::string_view what) {
  auto v = cur.read<Stored>(what);
  if (!v) return v.error();
  return GgufValue{type, static_cast<Wide>(*v)};
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  static constexpr std::string_view kNames[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                                "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto index = static_cast<uint32_t>(type);
  return index < std::size(kNames) ? kNames[index] : "UNKNOWN";
}

// Parses one file front to back: header, metadata, tensor infos, then places the data section and checks
// every tensor against it. Owns nothing; fills a GgufFile.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, GgufFile& file) : cur_(bytes, file.name_), file_(file) {}

  Result<void> run() {
    HEARTH_TRY(parse_header());
    for (uint64_t i = 0; i < n_kv_; ++i) HEARTH_TRY(parse_kv(i));
    for (uint64_t i = 0; i < n_tensors_; ++i) HEARTH_TRY(parse_tensor_info(i));
    cur_.set_context(nullptr);
    return place_data();
  }

 private:
  Result<void> parse_header();
  Result<void> parse_kv(uint64_t index);
  Result<GgufValue> parse_value(GgufType type, int depth);
  Result<GgufValue> parse_array(int depth);
  Result<void> parse_items(GgufArray& array, uint64_t count, int depth);
  template <class Stored, class Wide>
  Result<void> decode_items(std::vector<GgufValue>& items, uint64_t count, GgufType type);
  Result<void> parse_string_items(std::vector<GgufValue>& items, uint64_t count);
  Result<GgufType> parse_type(std::string_view what);
  Result<void> set_alignment(const GgufValue& value, size_t at);
  Result<void> parse_tensor_info(uint64_t index);
  Result<void> parse_dims(GgufTensor& tensor);
  Result<void> size_tensor(GgufTensor& tensor, size_t at);
  Result<void> place_data();

  Cursor cur_;
  GgufFile& file_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::vector<size_t> offset_field_at_;  // byte offset of each tensor's `offset` field, for errors
};

Result<void> GgufParser::parse_header() {
  auto magic = cur_.read<uint32_t>("magic");
  if (!magic) return magic.error();
  if (*magic != kGgufMagic) {
    return cur_.error_at(0, "not a GGUF file: magic is {:08x}, expected 47475546 (\"GGUF\")",
                         __builtin_bswap32(*magic));
  }
  auto version = cur_.read<uint32_t>("version");
  if (!version) return version.error();
  if (*version == 1) return cur_.error_at(4, "GGUF version 1 is not supported (only versions 2 and 3)");
  if (*version != 2 && *version != 3) {
    bool swapped = __builtin_bswap32(*version) == 2 || __builtin_bswap32(*version) == 3;
    return cur_.error_at(4, "unsupported GGUF version {}{} (only versions 2 and 3)", *version,
                         swapped ? ", probably a big-endian file" : "");
  }
  file_.version_ = *version;
  auto n_tensors = cur_.read<uint64_t>("tensor count");
  if (!n_tensors) return n_tensors.error();
  auto n_kv = cur_.read<uint64_t>("metadata count");
  if (!n_kv) return n_kv.error();
  // Each entry takes a minimum number of bytes, so a corrupt count is caught before anything is reserved.
  uint64_t room = cur_.remaining();
  if (*n_kv > room / kMinKvBytes) {
    return cur_.error_at(16, "metadata count {} cannot fit in the {} bytes that remain", *n_kv, room);
  }
  if (*n_tensors > (room - *n_kv * kMinKvBytes) / kMinTensorInfoBytes) {
    return cur_.error_at(8, "tensor count {} cannot fit in the {} bytes that remain", *n_tensors, room);
  }
  n_tensors_ = *n_tensors;
  n_kv_ = *n_kv;
  file_.metadata_.reserve(n_kv_);
  file_.tensors_.reserve(n_tensors_);
  offset_field_at_.reserve(n_tensors_);
  return {};
}

Result<GgufType> GgufParser::parse_type(std::string_view what) {
  size_t at = cur_.offset();
  auto raw = cur_.read<uint32_t>(what);
  if (!raw) return raw.error();
  if (!is_known_type(*raw)) return cur_.error_at(at, "unknown {} {}", what, *raw);
  return static_cast<GgufType>(*raw);
}

Result<void> GgufParser::parse_kv(uint64_t index) {
  cur_.set_context("metadata entry", index);
  size_t key_at = cur_.offset();
  auto key = cur_.read_string("key");
  if (!key) return key.error();
  cur_.set_context("metadata entry", index, *key);
  if (file_.metadata_index_.count(*key) != 0) return cur_.error_at(key_at, "duplicate metadata key '{}'", *key);
  auto type = parse_type("metadata value type");
  if (!type) return type.error();
  size_t value_at = cur_.offset();
  auto value = parse_value(*type, 0);
  if (!value) return value.error();
  if (*key == "general.alignment") HEARTH_TRY(set_alignment(*value, value_at));
  file_.metadata_index_.emplace(*key, file_.metadata_.size());
  file_.metadata_.emplace_back(std::move(*key), std::move(*value));
  return {};
}

Result<GgufValue> GgufParser::parse_value(GgufType type, int depth) {
  switch (type) {
    case GgufType::UINT8:
      return read_scalar<uint8_t, uint64_t>(cur_, type, "UINT8 value");
    case GgufType::INT8:
      return read_scalar<int8_t, int64_t>(cur_, type, "INT8 value");
    case GgufType::UINT16:
      return read_scalar<uint16_t, uint64_t>(cur_, type, "UINT16 value");
    case GgufType::INT16:
      return read_scalar<int16_t, int64_t>(cur_, type, "INT16 value");
    case GgufType::UINT32:
      return read_scalar<uint32_t, uint64_t>(cur_, type, "UINT32 value");
    case GgufType::INT32:
      return read_scalar<int32_t, int64_t>(cur_, type, "INT32 value");
    case GgufType::UINT64:
      return read_scalar<uint64_t, uint64_t>(cur_, type, "UINT64 value");
    case GgufType::INT64:
      return read_scalar<int64_t, int64_t>(cur_, type, "INT64 value");
    case GgufType::FLOAT32:
      return read_scalar<float, double>(cur_, type, "FLOAT32 value");
    case GgufType::FLOAT64:
      return read_scalar<double, double>(cur_, type, "FLOAT64 value");
    case GgufType::BOOL: {
      size_t at = cur_.offset();
      auto b = cur_.read<uint8_t>("BOOL value");
      if (!b) return b.error();
      if (*b > 1) return cur_.error_at(at, "BOOL value is {}, expected 0 or 1", *b);
      return GgufValue{type, *b == 1};
    }
    case GgufType::STRING: {
      auto s = cur_.read_string("string");
      if (!s) return s.error();
      return GgufValue{type, std::move(*s)};
    }
    case GgufType::ARRAY:
      return parse_array(depth + 1);
  }
  return cur_.error_at(cur_.offset(), "unknown metadata value type {}", static_cast<uint32_t>(type));
}

Result<GgufValue> GgufParser::parse_array(int depth) {
  size_t at = cur_.offset();
  if (depth > kMaxArrayDepth) return cur_.error_at(at, "arrays nested deeper than {} levels", kMaxArrayDepth);
  auto elem_type = parse_type("array element type");
  if (!elem_type) return elem_type.error();
  size_t count_at = cur_.offset();
  auto count = cur_.read<uint64_t>("array length");
  if (!count) return count.error();
  uint64_t min_bytes = min_value_bytes(*elem_type);
  if (*count > cur_.remaining() / min_bytes) {
    return cur_.error_at(count_at, "array of {} {} items runs past end of file ({} bytes remain)", *count,
                         gguf_type_name(*elem_type), cur_.remaining());
  }
  auto array = std::make_shared<GgufArray>();
  array->elem_type = *elem_type;
  array->items.reserve(*count);
  HEARTH_TRY(parse_items(*array, *count, depth));
  return GgufValue{GgufType::ARRAY, std::move(array)};
}

// Vocabularies hold arrays of 100k+ strings and floats, so the common element types skip the per-value Result.
Result<void> GgufParser::parse_items(GgufArray& array, uint64_t count, int depth) {
  std::vector<GgufValue>& items = array.items;
  switch (array.elem_type) {
    case GgufType::UINT8:
      return decode_items<uint8_t, uint64_t>(items, count, GgufType::UINT8);
    case GgufType::INT8:
      return decode_items<int8_t, int64_t>(items, count, GgufType::INT8);
    case GgufType::UINT16:
      return decode_items<uint16_t, uint64_t>(items, count, GgufType::UINT16);
    case GgufType::INT16:
      return decode_items<int16_t, int64_t>(items, count, GgufType::INT16);
    case GgufType::UINT32:
      return decode_items<uint32_t, uint64_t>(items, count, GgufType::UINT32);
    case GgufType::INT32:
      return decode_items<int32_t, int64_t>(items, count, GgufType::INT32);
    case GgufType::UINT64:
      return decode_items<uint64_t, uint64_t>(items, count, GgufType::UINT64);
    case GgufType::INT64:
      return decode_items<int64_t, int64_t>(items, count, GgufType::INT64);
    case GgufType::FLOAT32:
      return decode_items<float, double>(items, count, GgufType::FLOAT32);
    case GgufType::FLOAT64:
      return decode_items<double, double>(items, count, GgufType::FLOAT64);
    case GgufType::STRING:
      return parse_string_items(items, count);
    case GgufType::BOOL:
    case GgufType::ARRAY:
      break;
  }
  for (uint64_t i = 0; i < count; ++i) {
    auto item = parse_value(array.elem_type, depth);
    if (!item) return item.error();
    items.push_back(std::move(*item));
  }
  return {};
}

// Requires the caller to have checked that `count` items of Stored fit in the remaining bytes.
template <class Stored, class Wide>
Result<void> GgufParser::decode_items(std::vector<GgufValue>& items, uint64_t count, GgufType type) {
  const uint8_t* p = cur_.take(count * sizeof(Stored));
  items.resize(count, GgufValue{type, Wide{}});
  for (uint64_t i = 0; i < count; ++i) {
    Stored v;
    std::memcpy(&v, p + i * sizeof(Stored), sizeof(Stored));
    *std::get_if<Wide>(&items[i].data) = static_cast<Wide>(v);
  }
  return {};
}

Result<void> GgufParser::parse_string_items(std::vector<GgufValue>& items, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t length = 0;
    if (cur_.remaining() < 8 || (length = cur_.peek_u64()) > cur_.remaining() - 8) {
      auto failed = cur_.read_string("string");  // re-read for the precise error
      HEARTH_CHECK(!failed, "string item {} was out of bounds but read back fine", i);
      return failed.error();
    }
    const char* chars = reinterpret_cast<const char*>(cur_.take(8 + length) + 8);
    GgufValue& item = items.emplace_back();
    item.type = GgufType::STRING;
    item.data.template emplace<std::string>(chars, length);
  }
  return {};
}

Result<void> GgufParser::set_alignment(const GgufValue& value, size_t at) {
  uint64_t alignment = 0;
  if (is_unsigned(value.type)) {
    alignment = std::get<uint64_t>(value.data);
  } else if (is_signed(value.type) && std::get<int64_t>(value.data) > 0) {
    alignment = static_cast<uint64_t>(std::get<int64_t>(value.data));
  } else if (!is_signed(value.type)) {
    return cur_.error_at(at, "general.alignment has type {}, expected an integer", gguf_type_name(value.type));
  }
  if (!std::has_single_bit(alignment)) {
    return cur_.error_at(at, "general.alignment {} is not a nonzero power of two", gguf_value_to_string(value));
  }
  file_.alignment_ = alignment;
  return {};
}

Result<void> GgufParser::parse_tensor_info(uint64_t index) {
  cur_.set_context("tensor info", index);
  size_t name_at = cur_.offset();
  auto name = cur_.read_string("tensor name");
  if (!name) return name.error();
  GgufTensor tensor;
  tensor.name = std::move(*name);
  cur_.set_context("tensor info", index, tensor.name);
  if (file_.tensor_index_.count(tensor.name) != 0) {
    return cur_.error_at(name_at, "duplicate tensor name '{}'", tensor.name);
  }
  HEARTH_TRY(parse_dims(tensor));
  size_t type_at = cur_.offset();
  auto raw_type = cur_.read<uint32_t>("tensor type");
  if (!raw_type) return raw_type.error();
  auto info = dtype_info(*raw_type);
  if (!info) return cur_.error_at(type_at, "unknown tensor type {}", *raw_type);
  tensor.type = info->type;
  HEARTH_TRY(size_tensor(tensor, type_at));
  size_t offset_at = cur_.offset();
  auto offset = cur_.read<uint64_t>("tensor data offset");
  if (!offset) return offset.error();
  if (*offset % file_.alignment_ != 0) {
    return cur_.error_at(offset_at, "tensor data offset {} is not a multiple of the alignment {}", *offset,
                         file_.alignment_);
  }
  tensor.offset = *offset;
  file_.tensor_index_.emplace(tensor.name, file_.tensors_.size());
  file_.tensors_.push_back(std::move(tensor));
  offset_field_at_.push_back(offset_at);
  return {};
}

Result<void> GgufParser::parse_dims(GgufTensor& tensor) {
  size_t at = cur_.offset();
  auto n_dims = cur_.read<uint32_t>("tensor dimension count");
  if (!n_dims) return n_dims.error();
  if (*n_dims < 1 || *n_dims > kMaxDims) {
    return cur_.error_at(at, "tensor has {} dimensions, expected 1 to {}", *n_dims, kMaxDims);
  }
  tensor.n_dims = static_cast<int>(*n_dims);
  int64_t elements = 1;
  for (int d = 0; d < tensor.n_dims; ++d) {
    size_t dim_at = cur_.offset();
    auto ne = cur_.read<uint64_t>("tensor dimension");
    if (!ne) return ne.error();
    if (*ne == 0 || *ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return cur_.error_at(dim_at, "tensor dimension {} is {}, expected a positive size", d, static_cast<int64_t>(*ne));
    }
    tensor.ne[d] = static_cast<int64_t>(*ne);
    if (__builtin_mul_overflow(elements, tensor.ne[d], &elements)) {
      return cur_.error_at(dim_at, "tensor element count overflows 64 bits at dimension {}", d);
    }
  }
  return {};
}

Result<void> GgufParser::size_tensor(GgufTensor& tensor, size_t at) {
  const DTypeInfo& info = dtype_info(tensor.type);
  if (tensor.ne[0] % info.block_size != 0) {
    return cur_.error_at(at, "tensor row of {} elements is not a multiple of the {} block size {}", tensor.ne[0],
                         info.name, info.block_size);
  }
  uint64_t nbytes = static_cast<uint64_t>(tensor.ne[0] / info.block_size) * info.block_bytes;
  for (int d = 1; d < kMaxDims; ++d) {
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(tensor.ne[d]), &nbytes)) {
      return cur_.error_at(at, "tensor byte size overflows 64 bits");
    }
  }
  tensor.nbytes = nbytes;
  return {};
}

Result<void> GgufParser::place_data() {
  uint64_t end = cur_.offset();
  uint64_t size = file_.bytes_.size();
  uint64_t align = file_.alignment_;
  uint64_t data_offset = 0;
  bool overflow = __builtin_add_overflow(end, align - 1, &data_offset);
  data_offset = overflow ? std::numeric_limits<uint64_t>::max() : data_offset / align * align;
  if (file_.tensors_.empty()) {
    // Vocabulary-only files often end right after the metadata, without the padding.
    file_.data_offset_ = std::min(data_offset, size);
    return {};
  }
  if (data_offset > size) {
    return cur_.error_at(end, "data section would start at byte {} (alignment {}), past end of file ({} bytes)",
                         data_offset, file_.alignment_, size);
  }
  file_.data_offset_ = data_offset;
  uint64_t room = size - data_offset;
  for (size_t i = 0; i < file_.tensors_.size(); ++i) {
    GgufTensor& t = file_.tensors_[i];
    if (t.offset > room || t.nbytes > room - t.offset) {
      return cur_.error_at(offset_field_at_[i],
                           "tensor '{}' data [{}, +{}) runs past end of file (data section starts at byte {} and "
                           "holds {} bytes)",
                           t.name, t.offset, t.nbytes, data_offset, room);
    }
    t.data = file_.bytes_.data() + data_offset + t.offset;
  }
  return {};
}

GgufFile::GgufFile() = default;
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  GgufFile file;
  file.name_ = std::move(name);
  file.bytes_ = bytes;
  GgufParser parser(bytes, file);
  HEARTH_TRY(parser.run());
  return file;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return mapping.error();
  auto file = parse(mapping->bytes(), path);
  if (!file) return file.error();
  // The mmap does not move when the MappedFile does, so the views stay valid.
  file->mapping_ = std::move(*mapping);
  return std::move(*file);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace hearth

#pragma once
// Helpers for the GGUF tests: a raw byte builder for hand-made (often broken) files, and an exactly-sized heap
// copy of some bytes so AddressSanitizer flags any read past their end.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"

namespace hearth::testing {

// Appends little-endian fields; `size()` before a put is the byte offset of that field.
class GgufBytes {
 public:
  template <class T>
  GgufBytes& put(T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& type(GgufType t) { return u32(static_cast<uint32_t>(t)); }
  // magic, version, tensor count, metadata count
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).type(GgufType::UINT32).u32(v); }
  GgufBytes& tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t dtype, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    return u32(dtype).u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A heap buffer of exactly `size` bytes: ASan reports any access past its end.
class ExactBytes {
 public:
  explicit ExactBytes(std::span<const uint8_t> src) : data_(new uint8_t[src.size()]), size_(src.size()) {
    if (!src.empty()) std::memcpy(data_.get(), src.data(), src.size());
  }
  std::span<const uint8_t> span() const { return {data_.get(), size_}; }
  uint8_t* data() { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_;
};

inline std::vector<uint8_t> read_whole_file(const std::string& path) {
  std::vector<uint8_t> out;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return out;
  uint8_t buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) out.insert(out.end(), buf, buf + n);
  return out;
}

}  // namespace hearth::testing

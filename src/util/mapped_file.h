#pragma once
// MappedFile: RAII read-only mmap of a whole file.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace hearth {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  // Maps `path` read-only. Fails with a message naming the file when it cannot be opened or mapped.
  [[nodiscard]] static Result<MappedFile> open(const std::string& path);

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace hearth

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
  // Drops this process's resident pages of the whole pages inside `range` (a part of bytes()): a one-off read (a
  // checksum) then leaves nothing behind in RSS. The mapping is read-only and file-backed, so nothing is lost: the
  // page cache keeps the pages and a later read faults them back in. Ranges outside the mapping are ignored.
  void release_resident(std::span<const uint8_t> range) const;
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace hearth

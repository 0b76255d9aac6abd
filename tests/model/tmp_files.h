#pragma once
// Scratch files of one test process (synthetic GGUFs, disk tiers) under HEARTH_TEST_TMP_DIR: registered by
// remove_at_exit and removed when the process ends normally, with every file named after theirs and a '.' (the
// peer's "X.gguf.peer.log"). ctest runs each test in a process of its own, so a full run leaves nothing behind (it left
// gigabytes before).

#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

namespace hearth::test {

class TmpFiles {
 public:
  ~TmpFiles() {
    std::error_code ec;
    for (const std::filesystem::path& p : paths_) {
      std::filesystem::remove_all(p, ec);
      const std::string stem = p.filename().string();
      for (const auto& entry : std::filesystem::directory_iterator(p.parent_path(), ec)) {
        if (entry.path().filename().string().starts_with(stem + ".")) std::filesystem::remove_all(entry.path(), ec);
      }
    }
  }
  void add(const std::string& path) {
    std::lock_guard lock(mutex_);
    paths_.emplace_back(path);
  }

 private:
  std::mutex mutex_;
  std::vector<std::filesystem::path> paths_;
};

// Returns `path`, to be removed (a file or a directory) when the process exits.
inline std::string remove_at_exit(const std::string& path) {
  static TmpFiles files;
  files.add(path);
  return path;
}

}  // namespace hearth::test

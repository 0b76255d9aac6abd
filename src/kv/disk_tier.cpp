#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/ranges.h>

#include "util/log.h"

namespace hearth {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kPage = 4096;
constexpr double kAverageWeight = 0.3;  // weight of the newest measurement in seconds_per_block

int64_t rounded(int64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t mtime_ms(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Reads all of fd into out; false on an error or a short file.
bool read_all(int fd, uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, out + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const uint8_t* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// Creates `dir` and its missing parents with mode 0700 (at mkdir, never chmod'ed after: there is no moment when
// another local user could open them). Existing directories are left as they are; check_private_modes() warns.
bool make_private_dirs(const fs::path& dir, std::error_code& ec) {
  fs::path at;
  for (const fs::path& part : dir) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
      return false;
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    ec = std::make_error_code(std::errc::not_a_directory);
    return false;
  }
  return true;
}

// Opens an entry for reading only if it is a regular file: O_NONBLOCK so a FIFO never blocks the open, O_NOFOLLOW so
// a link never leads out of the tier, then fstat on what was opened (no race with a swap). -1 with *irregular set
// for anything else (FIFO, socket, device, link, directory).
int open_regular(const fs::path& path, bool* irregular) {
  *irregular = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    // A socket (ENXIO), a link (ELOOP), a device on a nodev mount (EACCES): what the name is, not why open failed.
    const int open_errno = errno;
    struct stat st {};
    *irregular = ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
    errno = open_errno;
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *irregular = true;
    ::close(fd);
    return -1;
  }
  return fd;
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

fs::path default_disk_tier_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return fs::path(xdg) / "hearth" / "kv-cache";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && home[0] != '\0' ? home : "/tmp") / ".cache" / "hearth" / "kv-cache";
}

int64_t default_disk_tier_bytes(const fs::path& dir) {
  fs::path probe = dir;
  while (!probe.empty() && !fs::exists(probe)) probe = probe.parent_path();
  struct statvfs st {};
  if (probe.empty() || ::statvfs(probe.c_str(), &st) != 0) return 256ll << 20;
  const auto free_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  return std::clamp<int64_t>(free_bytes / 10, std::min<int64_t>(256ll << 20, free_bytes), 64ll << 30);
}

DiskTier::DiskTier(const DiskTierConfig& config) : config_(config), codec_(config.seal_key) {}

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierConfig& config) {
  if (config.capacity_bytes < kPage) {
    return make_error("the disk tier's size must be at least 4 KiB (got {} bytes)", config.capacity_bytes);
  }
  std::error_code ec;
  const fs::path root = config.dir / "v1";
  if (!make_private_dirs(root / "tmp", ec)) {
    return make_error("cannot create the disk tier directory {}: {}", root.string(), ec.message());
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(config));
  tier->lock_fd_ = ::open((root / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (tier->lock_fd_ < 0) {
    return make_error("cannot open the disk tier lock {}: {}", (root / "lock").string(), std::strerror(errno));
  }
  if (::flock(tier->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return make_error("another Hearth process is using the disk tier {} (its lock is held)", config.dir.string());
  }
  tier->stats_.capacity_bytes = config.capacity_bytes;
  tier->check_private_modes();
  tier->scan();
  if (tier->stats_.num_irregular_skipped > 0) {
    spdlog::warn("disk tier: skipped {} entries that are not regular files (FIFOs, sockets, devices or links) in {}",
                 tier->stats_.num_irregular_skipped, root.string());
  }
  tier->writer_ = std::thread([t = tier.get()] { t->writer_main(); });
  tier->reader_ = std::thread([t = tier.get()] { t->reader_main(); });
  return tier;
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  read_work_.notify_all();
  if (writer_.joinable()) writer_.join();  // finishes the queued writes first
  if (reader_.joinable()) reader_.join();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

fs::path DiskTier::entry_path(const BlockHash& key) const {
  const std::string name = entry_name(key);
  return config_.dir / "v1" / name.substr(0, 2) / (name + ".kvb");
}

void DiskTier::check_private_modes() {
  const fs::path root = config_.dir / "v1";
  std::vector<fs::path> dirs = {config_.dir, root, root / "tmp"};
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(root, ec)) {
    std::error_code type_ec;
    if (sub.is_directory(type_ec) && !sub.is_symlink(type_ec) && sub.path().filename().string().size() == 2) {
      dirs.push_back(sub.path());
    }
  }
  std::vector<std::string> loose;
  for (const fs::path& d : dirs) {
    struct stat st {};
    if (::stat(d.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      loose.push_back(fmt::format("{} ({:04o})", d.string(), st.st_mode & 07777));
    }
  }
  struct stat lock_st {};
  if (::fstat(lock_fd_, &lock_st) == 0 && (lock_st.st_mode & 077) != 0) {
    loose.push_back(fmt::format("{} ({:04o})", (root / "lock").string(), lock_st.st_mode & 07777));
  }
  stats_.num_loose_modes += loose.size();
  if (!loose.empty()) {
    spdlog::warn("disk tier: other local users may read every tenant's cached prompts: {} (want 0700 directories "
                 "and 0600 files: chmod -R go= {})",
                 fmt::join(loose, ", "), config_.dir.string());
  }
}

void DiskTier::scan() {
  const fs::path root = config_.dir / "v1";
  std::error_code ec;
  for (const auto& tmp : fs::directory_iterator(root / "tmp", ec)) fs::remove(tmp.path(), ec);
  const int64_t now = unix_ms_now();
  std::vector<uint8_t> buf;
  uint64_t num_loose_entries = 0;
  for (const auto& sub : fs::directory_iterator(root, ec)) {
    std::error_code type_ec;
    if (!sub.is_directory(type_ec) || sub.is_symlink(type_ec) || sub.path().filename().string().size() != 2) continue;
    std::error_code sub_ec;
    for (const auto& file : fs::directory_iterator(sub.path(), sub_ec)) {
      if (file.path().extension() != ".kvb") continue;
      bool irregular = false;
      const int fd = open_regular(file.path(), &irregular);
      if (fd < 0) {
        stats_.num_irregular_skipped += irregular ? 1 : 0;
        continue;
      }
      struct stat st {};
      bool ok = ::fstat(fd, &st) == 0;
      if (ok && (st.st_mode & 077) != 0) num_loose_entries++;
      const auto size = static_cast<uint64_t>(st.st_size);
      buf.resize(std::min<uint64_t>(
          size, kTierSealFixedBytes + kTierEntryFixedBytes + kTierMaxLayoutBytes + 4ull * kTierMaxTokens));
      ok = ok && read_all(fd, buf.data(), buf.size());
      ::close(fd);
      std::optional<TierEntryHeader> header;
      bool key_mismatch = false;
      if (ok) {
        auto decoded = codec_.decode_header(buf, size);
        key_mismatch = !decoded && decoded.error().problem == TierEntryProblem::kKeyMismatch;
        if (decoded && entry_name(decoded->key) + ".kvb" == file.path().filename().string()) {
          header = std::move(*decoded);
        }
      }
      if (!header) {
        fs::remove(file.path(), sub_ec);
        removed_at_open_++;
        stats_.num_corrupt_removed++;
        stats_.num_key_mismatch_removed += key_mismatch ? 1 : 0;
        continue;
      }
      Entry e;
      e.info.key = header->key;
      e.info.parent_key = header->parent_key;
      e.info.ns = header->ns;
      e.info.depth = header->depth;
      e.info.tokens = std::move(header->tokens);
      e.info.retention = header->retention;
      e.info.last_used_ms = std::min(mtime_ms(st), now);
      e.info.bytes = rounded(static_cast<int64_t>(size));
      e.file_bytes = static_cast<int64_t>(size);
      std::lock_guard lock(mutex_);
      index_insert(std::move(e));
    }
  }
  if (num_loose_entries > 0) {
    spdlog::warn("disk tier: {} entries in {} are readable by other local users (want 0600: chmod -R go= {})",
                 num_loose_entries, root.string(), config_.dir.string());
  }
  std::lock_guard lock(mutex_);
  stats_.num_loose_modes += num_loose_entries;
  // A budget smaller than what is already there (the flag changed): evict down to it now.
  while (stats_.bytes_used > config_.capacity_bytes && evict_one()) {
  }
}

DiskTier::EvictOrder DiskTier::evict_order(const Entry& e, int64_t now_ms) const {
  const TierRetention& r = e.info.retention;
  const bool expired = r.expires_at_ms != 0 && r.expires_at_ms <= now_ms;
  return EvictOrder{expired ? uint8_t{0} : r.priority, static_cast<uint8_t>(e.info.hits > 0 ? 1 : 0),
                    e.info.last_used_ms, -e.info.depth, e.info.key};
}

void DiskTier::index_insert(Entry e) {
  const BlockHash key = e.info.key;
  if (index_.contains(key)) index_erase(key);
  const EvictOrder order = evict_order(e, unix_ms_now());
  stats_.bytes_used += e.info.bytes;
  stats_.num_entries++;
  evict_.insert(order);
  evict_key_[key] = order;
  const bool has_parent = e.info.depth > 0;
  const BlockHash parent = e.info.parent_key;
  const int64_t last_used = e.info.last_used_ms;
  index_.emplace(key, std::move(e));
  if (has_parent) index_touch(parent, last_used);
}

void DiskTier::index_erase(const BlockHash& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  stats_.bytes_used -= it->second.info.bytes;
  stats_.num_entries--;
  evict_.erase(evict_key_[key]);
  evict_key_.erase(key);
  index_.erase(it);
}

void DiskTier::index_touch(const BlockHash& key, int64_t now_ms) {
  // A use of a block is a use of its whole prefix: the ancestors get the same last use, so with the depth tiebreak a
  // chain is evicted tail first. The walk stops at the first ancestor already as recent (those above it are too).
  BlockHash k = key;
  for (bool first = true;; first = false) {
    auto it = index_.find(k);
    if (it == index_.end() || (!first && it->second.info.last_used_ms >= now_ms)) return;
    evict_.erase(evict_key_[k]);
    it->second.info.last_used_ms = std::max(it->second.info.last_used_ms, now_ms);
    const EvictOrder order = evict_order(it->second, now_ms);
    evict_.insert(order);
    evict_key_[k] = order;
    if (it->second.info.depth == 0) return;
    k = it->second.info.parent_key;
  }
}

bool DiskTier::evict_one(std::vector<fs::path>* doomed) {
  if (evict_.empty()) return false;
  const BlockHash key = evict_.begin()->key;
  if (doomed != nullptr) {
    doomed->push_back(entry_path(key));  // unlinked by the caller, outside the lock
  } else {
    std::error_code ec;
    fs::remove(entry_path(key), ec);
  }
  index_erase(key);
  stats_.num_evictions++;
  return true;
}

bool DiskTier::contains(const BlockHash& key) const {
  std::lock_guard lock(mutex_);
  return index_.contains(key);
}

bool DiskTier::write(TierEntryHeader header, std::vector<uint8_t> payload, std::string_view /*model*/) {
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(header.key); it != index_.end()) {
    index_touch(header.key, unix_ms_now());
    return true;
  }
  const auto bytes = static_cast<int64_t>(payload.size());
  if (rounded(static_cast<int64_t>(header.file_bytes())) > config_.capacity_bytes ||
      queued_write_bytes_ + bytes > config_.max_queued_write_bytes) {
    stats_.num_writes_dropped++;
    return false;
  }
  queued_write_bytes_ += bytes;
  writes_.push_back({std::move(header), std::move(payload)});
  work_.notify_one();
  return true;
}

uint64_t DiskTier::load(std::vector<BlockHash> keys, std::string layout, uint64_t owner) {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_job_++;
  loads_.push_back({id, owner, std::move(keys), std::move(layout), std::chrono::steady_clock::now()});
  read_work_.notify_one();
  return id;
}

std::vector<TierLoadDone> DiskTier::take_loaded(uint64_t owner) {
  std::lock_guard lock(mutex_);
  return loaded_.take(owner);
}

bool DiskTier::wait_loaded(std::chrono::steady_clock::time_point deadline, uint64_t owner) {
  std::unique_lock lock(mutex_);
  return done_.wait_until(lock, deadline, [&] { return loaded_.has(owner); });
}

void DiskTier::set_retention(const BlockHash& key, const TierRetention& retention) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    for (WriteJob& job : writes_) {  // not written yet: it will be, with this retention
      if (job.header.key == key) job.header.retention = retention;
    }
    return;
  }
  it->second.info.retention = retention;
  index_touch(key, 0);  // re-keys the eviction order without changing the last use
  retention_updates_.emplace_back(key, retention);  // the file changes on the writer thread
  work_.notify_one();
}

void DiskTier::write_retention(const BlockHash& key, const TierRetention& retention) {
  // The retention bytes are outside the checksum (and, sealed, outside the ciphertext), so they change in place.
  const int fd = ::open(entry_path(key).c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  const auto bytes = encode_tier_retention(retention);
  const size_t offset = codec_.retention_offset();
  if (::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes.size())) {
    ::fdatasync(fd);
  }
  ::close(fd);
}

double DiskTier::seconds_per_block() const {
  std::lock_guard lock(mutex_);
  return seconds_per_block_;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard lock(mutex_);
  DiskTierStats s = stats_;  // bytes_used already holds the writes in progress (write_batch reserves them there)
  s.num_queued_writes = static_cast<int64_t>(writes_.size() + num_writes_in_flight_);
  return s;
}

std::vector<TierEntryInfo> DiskTier::entries(const BlockHash& ns, size_t max) const {
  std::lock_guard lock(mutex_);
  std::vector<TierEntryInfo> out;
  for (const auto& [key, e] : index_) {
    if (e.info.ns == ns) out.push_back(e.info);
  }
  std::sort(out.begin(), out.end(), [](const TierEntryInfo& a, const TierEntryInfo& b) {
    return std::tie(b.last_used_ms, a.depth) < std::tie(a.last_used_ms, b.depth);
  });
  if (out.size() > max) out.resize(max);
  return out;
}

void DiskTier::flush() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] {
    return (writes_.empty() && retention_updates_.empty() && !writing_) || !writer_.joinable();
  });
}

void DiskTier::reader_main() {
  std::unique_lock lock(mutex_);
  for (;;) {
    read_work_.wait(lock, [&] { return stopping_ || !loads_.empty(); });
    if (loads_.empty()) break;  // stopping
    TierLoadJob job = std::move(loads_.front());
    loads_.pop_front();
    lock.unlock();
    do_load(std::move(job));
    lock.lock();
  }
}

void DiskTier::writer_main() {
  constexpr size_t kMaxBatch = 64;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !writes_.empty() || !retention_updates_.empty(); });
    if (!retention_updates_.empty()) {
      auto updates = std::exchange(retention_updates_, {});
      writing_ = true;
      lock.unlock();
      for (const auto& [key, retention] : updates) write_retention(key, retention);
      lock.lock();
      if (writes_.empty() && retention_updates_.empty()) {
        writing_ = false;
        done_.notify_all();
      }
      continue;
    }
    if (writes_.empty()) break;  // stopping, and everything queued is written
    std::vector<WriteJob> batch;
    while (!writes_.empty() && batch.size() < kMaxBatch) {
      queued_write_bytes_ -= static_cast<int64_t>(writes_.front().payload.size());
      batch.push_back(std::move(writes_.front()));
      writes_.pop_front();
    }
    writing_ = true;
    num_writes_in_flight_ = batch.size();
    lock.unlock();
    write_batch(std::move(batch));
    lock.lock();
    num_writes_in_flight_ = 0;
    if (writes_.empty() && retention_updates_.empty()) {
      writing_ = false;
      done_.notify_all();
    }
  }
  writing_ = false;
  done_.notify_all();
}

void DiskTier::write_batch(std::vector<WriteJob> jobs) {
  struct Pending {
    WriteJob job;
    fs::path tmp;
    fs::path final_path;
    int64_t need = 0;
    int64_t file_bytes = 0;
  };
  std::vector<Pending> pending;
  std::vector<fs::path> doomed;
  for (WriteJob& job : jobs) {
    std::vector<uint8_t> bytes = codec_.encode(job.header, job.payload);
    const int64_t need = rounded(static_cast<int64_t>(bytes.size()));
    {
      std::lock_guard lock(mutex_);
      if (index_.contains(job.header.key)) continue;
      while (stats_.bytes_used + need > config_.capacity_bytes && evict_one(&doomed)) {
      }
      if (stats_.bytes_used + need > config_.capacity_bytes) {
        stats_.num_writes_dropped++;
        continue;
      }
      stats_.bytes_used += need;  // the cap holds while the files are being written
    }
    for (const fs::path& path : doomed) {
      std::error_code ec;
      fs::remove(path, ec);
    }
    doomed.clear();
    Pending p;
    p.final_path = entry_path(job.header.key);
    p.tmp =
        config_.dir / "v1" / "tmp" / fmt::format("{}.{}.{}.tmp", entry_name(job.header.key), ::getpid(), next_tmp_++);
    p.need = need;
    p.file_bytes = static_cast<int64_t>(bytes.size());
    bool ok = false;
    const int fd = ::open(p.tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ok = write_all(fd, bytes.data(), bytes.size());
      ok = (::close(fd) == 0) && ok;
      if (!ok) ::unlink(p.tmp.c_str());
    }
    if (!ok) {
      std::lock_guard lock(mutex_);
      stats_.num_write_errors++;
      stats_.bytes_used -= need;
      continue;
    }
    p.job = std::move(job);
    pending.push_back(std::move(p));
  }
  if (pending.empty()) return;
  // One flush makes every temporary of the batch durable; only then do they take their final names.
  bool synced = false;
  if (const int dir_fd = ::open((config_.dir / "v1" / "tmp").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dir_fd >= 0) {
    synced = ::syncfs(dir_fd) == 0;
    ::close(dir_fd);
  }
  std::vector<fs::path> dirs;
  std::vector<bool> renamed(pending.size(), false);
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    std::error_code ec;
    make_private_dirs(p.final_path.parent_path(), ec);
    renamed[i] = synced && ::rename(p.tmp.c_str(), p.final_path.c_str()) == 0;
    if (!renamed[i]) {
      ::unlink(p.tmp.c_str());
      continue;
    }
    if (std::find(dirs.begin(), dirs.end(), p.final_path.parent_path()) == dirs.end()) {
      dirs.push_back(p.final_path.parent_path());
    }
  }
  for (const fs::path& d : dirs) fsync_dir(d);
  std::lock_guard lock(mutex_);
  const int64_t now = unix_ms_now();
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& p = pending[i];
    stats_.bytes_used -= p.need;
    if (!renamed[i]) {
      stats_.num_write_errors++;
      continue;
    }
    Entry e;
    e.info.key = p.job.header.key;
    e.info.parent_key = p.job.header.parent_key;
    e.info.ns = p.job.header.ns;
    e.info.depth = p.job.header.depth;
    e.info.tokens = std::move(p.job.header.tokens);
    e.info.retention = p.job.header.retention;
    e.info.last_used_ms = now;
    e.info.bytes = p.need;
    e.file_bytes = p.file_bytes;
    index_insert(std::move(e));
    stats_.num_writes++;
    stats_.num_written_bytes += static_cast<uint64_t>(p.file_bytes);
  }
}

std::optional<TierBlock> DiskTier::read_entry(const BlockHash& key, const std::string& layout) {
  int64_t file_bytes = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;  // evicted since the caller looked
    file_bytes = it->second.file_bytes;
  }
  const fs::path path = entry_path(key);
  std::vector<uint8_t> bytes;
  bool missing = false;
  bool read_ok = false;
  bool irregular = false;
  const int fd = open_regular(path, &irregular);
  if (fd < 0) {
    missing = errno == ENOENT;
  } else {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size == file_bytes) {
      bytes.resize(static_cast<size_t>(file_bytes));
      read_ok = read_all(fd, bytes.data(), bytes.size());
    }
    ::close(fd);
  }
  std::optional<TierBlock> block;
  bool key_mismatch = false;
  if (read_ok) {
    auto opened = codec_.open_block(bytes, key, layout);
    if (opened) {
      block = std::move(*opened);
    } else {
      key_mismatch = opened.error().refusal == TierBlockRefusal::kKeyMismatch;
      spdlog::warn("disk tier: {} is corrupt or foreign ({}); removed", path.string(), opened.error().message);
    }
  }
  if (block) {
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // the last use survives a restart as the file's mtime
  } else {
    std::error_code ec;
    fs::remove(path, ec);
  }
  std::lock_guard lock(mutex_);
  if (block) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second.info.hits++;
      index_touch(key, unix_ms_now());
    }
    return block;
  }
  index_erase(key);
  if (missing) {
    stats_.num_missing++;
  } else {
    stats_.num_corrupt_removed++;
    stats_.num_key_mismatch_removed += key_mismatch ? 1 : 0;
  }
  return std::nullopt;
}

void DiskTier::do_load(TierLoadJob job) {
  const auto start = std::chrono::steady_clock::now();
  TierLoadDone done;
  done.job = job.id;
  uint64_t bytes = 0;
  for (const BlockHash& key : job.keys) {
    std::optional<TierBlock> block = read_entry(key, job.layout);
    if (!block) break;
    bytes += block->payload.size();
    done.blocks.push_back(std::move(*block));
  }
  const auto end = std::chrono::steady_clock::now();
  done.seconds = std::chrono::duration<double>(end - job.queued).count();
  std::lock_guard lock(mutex_);
  stats_.num_loaded_blocks += done.blocks.size();
  stats_.num_loaded_bytes += bytes;
  stats_.load_seconds += std::chrono::duration<double>(end - start).count();
  if (!done.blocks.empty()) {
    const double per_block = done.seconds / static_cast<double>(done.blocks.size());
    seconds_per_block_ =
        seconds_per_block_ == 0 ? per_block : (1 - kAverageWeight) * seconds_per_block_ + kAverageWeight * per_block;
  }
  loaded_.add(job.owner, std::move(done));
  done_.notify_all();
}

}  // namespace hearth

#include "kv/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "util/log.h"

namespace hearth {
namespace {

constexpr double kAverageWeight = 0.3;  // weight of the newest measurement in seconds_per_block
constexpr size_t kMaxBatch = 64;        // writes pipelined in one round trip
constexpr int64_t kEventBlockMs = 250;  // XREAD BLOCK: how long the event reader waits for news
constexpr int64_t kEventBatch = 1000;   // events read per XREAD
constexpr std::chrono::milliseconds kMinBackoff{100};

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

std::string_view reply_str(const redisReply* r) {
  return r != nullptr && r->str != nullptr ? std::string_view(r->str, r->len) : std::string_view();
}

bool parse_int(std::string_view s, int* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Percent-decoding of a URL's user and password (a password may hold '@' or ':').
std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    int v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
      out += static_cast<char>(v);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

Result<RedisUrl> parse_redis_url(std::string_view url) {
  if (url.starts_with("rediss://")) {
    return make_error(
        "--kv-redis {}: TLS (rediss://) is not supported: Debian's hiredis 0.14 has no TLS. Reach a remote Redis "
        "through a TLS tunnel (stunnel, spiped or ssh -L) and give its local end as redis://127.0.0.1:PORT",
        url);
  }
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) {
    return make_error("--kv-redis {}: expected redis://[user:password@]host[:port][/db]", url);
  }
  std::string_view rest = url.substr(kScheme.size());
  RedisUrl u;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = auth.find(':');
    if (colon == std::string_view::npos) {
      u.password = percent_decode(auth);  // redis://password@host, as redis-cli -u reads it
    } else {
      u.user = percent_decode(auth.substr(0, colon));
      u.password = percent_decode(auth.substr(colon + 1));
    }
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!parse_int(db, &u.db) || u.db < 0)) {
      return make_error("--kv-redis {}: the database must be a number (got '{}')", url, db);
    }
    rest = rest.substr(0, slash);
  }
  std::string_view host = rest;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:6379
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return make_error("--kv-redis {}: unclosed '[' in the host", url);
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return make_error("--kv-redis {}: expected ':' after ']'", url);
    if (!rest.empty() && (!parse_int(rest.substr(1), &u.port) || u.port <= 0 || u.port > 65535)) {
      return make_error("--kv-redis {}: bad port '{}'", url, rest.substr(1));
    }
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    const std::string_view port = rest.substr(colon + 1);
    if (!parse_int(port, &u.port) || u.port <= 0 || u.port > 65535) {
      return make_error("--kv-redis {}: bad port '{}'", url, port);
    }
  }
  if (host.empty()) return make_error("--kv-redis {}: no host", url);
  u.host = std::string(host);
  return u;
}

// One connection of one thread: its context while up, and when to try again while down.
struct RedisTier::Connection {
  redisContext* ctx = nullptr;
  std::chrono::steady_clock::time_point retry_at{};
  std::chrono::milliseconds backoff = kMinBackoff;
  bool ever_connected = false;
  std::chrono::milliseconds timeout{};

  ~Connection() {
    if (ctx != nullptr) redisFree(ctx);
  }

  // Appends one command to the pipeline.
  void append(const std::vector<std::string_view>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> argvlen;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      argvlen.push_back(a.size());
    }
    redisAppendCommandArgv(ctx, static_cast<int>(args.size()), argv.data(), argvlen.data());
  }

  // The next reply of the pipeline; null on a transport failure (*timed_out when the command timeout passed).
  Reply next(bool* timed_out) {
    void* raw = nullptr;
    errno = 0;
    const int rc = redisGetReply(ctx, &raw);
    const int err = errno;
    if (rc != REDIS_OK || raw == nullptr) {
      *timed_out = ctx->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK);
      return nullptr;
    }
    return Reply(static_cast<redisReply*>(raw));
  }
};

std::unique_ptr<RedisTier> RedisTier::open(const RedisTierConfig& config) {
  std::unique_ptr<RedisTier> tier(new RedisTier(config));
  tier->writer_ = std::thread([t = tier.get()] { t->writer_main(); });
  tier->reader_ = std::thread([t = tier.get()] { t->reader_main(); });
  tier->events_ = std::thread([t = tier.get()] { t->events_main(); });
  return tier;
}

RedisTier::RedisTier(const RedisTierConfig& config) : config_(config), codec_(config.seal_key) {}

RedisTier::~RedisTier() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  read_work_.notify_all();
  stop_.notify_all();
  if (writer_.joinable()) writer_.join();  // tries the queued writes first
  if (reader_.joinable()) reader_.join();
  if (events_.joinable()) events_.join();
}

std::string RedisTier::redis_key(const BlockHash& key) const {
  return std::string(kRedisKeyPrefix) + codec_.entry_name(key);
}

bool RedisTier::ensure_connected(Connection& c, std::chrono::milliseconds timeout) {
  if (c.ctx != nullptr) return true;
  if (std::chrono::steady_clock::now() < c.retry_at) return false;
  c.timeout = timeout;
  c.ctx = redisConnectWithTimeout(config_.url.host.c_str(), config_.url.port, to_timeval(config_.connect_timeout));
  if (c.ctx == nullptr || c.ctx->err != 0) {
    drop(c, false);
    return false;
  }
  redisSetTimeout(c.ctx, to_timeval(timeout));
  std::vector<std::vector<std::string_view>> setup;
  if (!config_.url.password.empty()) {
    if (config_.url.user.empty()) {
      setup.push_back({"AUTH", config_.url.password});
    } else {
      setup.push_back({"AUTH", config_.url.user, config_.url.password});
    }
  }
  const std::string db = std::to_string(config_.url.db);
  if (config_.url.db != 0) setup.push_back({"SELECT", db});
  setup.push_back({"INFO", "server"});  // its run_id tells a restarted Redis (maybe empty) from the one we knew
  for (const auto& cmd : setup) c.append(cmd);
  std::string run_id;
  for (size_t i = 0; i < setup.size(); ++i) {
    bool timed_out = false;
    Reply r = c.next(&timed_out);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      if (r) spdlog::warn("redis tier: {} refused: {}", setup[i][0], reply_str(r.get()));
      drop(c, timed_out);
      return false;
    }
    const std::string_view info = reply_str(r.get());
    if (const size_t at = info.find("run_id:"); i + 1 == setup.size() && at != std::string_view::npos) {
      run_id = std::string(info.substr(at + 7, info.find_first_of("\r\n", at) - at - 7));
    }
  }
  c.backoff = kMinBackoff;
  std::lock_guard lock(mutex_);
  if (run_id != run_id_) {
    if (!run_id_.empty()) {
      // Another Redis process (a restart): what the old one held is not known to be there. The event reader starts
      // over on the new stream.
      spdlog::warn("redis tier: Redis restarted (run_id {} → {}); forgetting {} known blocks", run_id_, run_id,
                   known_.size());
      known_.clear();
      known_order_.clear();
      stats_.num_restarts_seen++;
    }
    run_id_ = run_id;
    redis_epoch_++;
  }
  if (c.ever_connected) stats_.num_reconnects++;
  c.ever_connected = true;
  connected_ = true;
  return true;
}

void RedisTier::drop(Connection& c, bool timed_out) {
  if (c.ctx != nullptr) {
    redisFree(c.ctx);
    c.ctx = nullptr;
  }
  c.retry_at = std::chrono::steady_clock::now() + c.backoff;
  c.backoff = std::min(c.backoff * 2, config_.max_backoff);
  connected_ = false;
  std::lock_guard lock(mutex_);
  if (timed_out) {
    stats_.num_timeouts++;
  } else {
    stats_.num_errors++;
  }
}

void RedisTier::known_insert(const BlockHash& name) {
  if (auto it = known_.find(name); it != known_.end()) {
    known_order_.splice(known_order_.begin(), known_order_, it->second);
    return;
  }
  known_order_.push_front(name);
  known_.emplace(name, known_order_.begin());
  while (known_.size() > config_.max_known_keys) {
    known_.erase(known_order_.back());
    known_order_.pop_back();
  }
}

void RedisTier::known_erase(const BlockHash& name) {
  auto it = known_.find(name);
  if (it == known_.end()) return;
  known_order_.erase(it->second);
  known_.erase(it);
}

bool RedisTier::contains(const BlockHash& key) const {
  const BlockHash name = codec_.entry_name_digest(key);
  std::lock_guard lock(mutex_);
  return known_.contains(name);
}

bool RedisTier::wait_num_known(size_t n, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  return done_.wait_until(lock, deadline, [&] { return known_.size() >= n; });
}

bool RedisTier::write(TierEntryHeader header, std::vector<uint8_t> payload, std::string_view model) {
  const BlockHash name = codec_.entry_name_digest(header.key);
  std::lock_guard lock(mutex_);
  if (auto it = known_.find(name); it != known_.end()) {
    known_order_.splice(known_order_.begin(), known_order_, it->second);
    return true;
  }
  const auto bytes = static_cast<int64_t>(payload.size());
  const bool expired = header.retention.expires_at_ms != 0 && header.retention.expires_at_ms <= unix_ms_now();
  if (expired || static_cast<int64_t>(header.file_bytes() + kTierSealFixedBytes) > config_.max_value_bytes ||
      queued_write_bytes_ + bytes > config_.max_queued_write_bytes) {
    stats_.num_writes_dropped++;
    return false;
  }
  queued_write_bytes_ += bytes;
  writes_.push_back({std::move(header), std::move(payload), std::string(model)});
  work_.notify_one();
  return true;
}

uint64_t RedisTier::load(std::vector<BlockHash> keys, std::string layout, uint64_t owner) {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_job_++;
  if (loads_.size() >= config_.max_queued_loads) {
    stats_.num_loads_dropped++;
    loaded_.add(owner, TierLoadDone{id, {}, 0});
    done_.notify_all();
    return id;
  }
  loads_.push_back({id, owner, std::move(keys), std::move(layout), std::chrono::steady_clock::now()});
  read_work_.notify_one();
  return id;
}

std::vector<TierLoadDone> RedisTier::take_loaded(uint64_t owner) {
  std::lock_guard lock(mutex_);
  return loaded_.take(owner);
}

bool RedisTier::wait_loaded(std::chrono::steady_clock::time_point deadline, uint64_t owner) {
  std::unique_lock lock(mutex_);
  return done_.wait_until(lock, deadline, [&] { return loaded_.has(owner); });
}

double RedisTier::seconds_per_block() const {
  std::lock_guard lock(mutex_);
  return seconds_per_block_;
}

RedisTierStats RedisTier::stats() const {
  std::lock_guard lock(mutex_);
  RedisTierStats s = stats_;
  s.connected = connected_;
  s.num_known_keys = static_cast<int64_t>(known_.size());
  s.num_queued_writes = static_cast<int64_t>(writes_.size() + num_writes_in_flight_);
  return s;
}

void RedisTier::flush() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return (writes_.empty() && !writing_) || !writer_.joinable(); });
}

void RedisTier::append_event(Connection& c, std::string_view event, const std::string& name, const BlockHash& ns,
                             std::string_view model) {
  // Sealed, the namespace travels as an HMAC too: its plain digest would let a watcher confirm a guessed salt.
  const std::string ns_hex = codec_.entry_name(ns);
  const std::string max_len = std::to_string(config_.stream_max_len);
  c.append({"XADD", kRedisEventStream, "MAXLEN", "~", max_len, "*", "event", event, "key", name, "ns", ns_hex, "model",
            model, "tier", "redis", "server", config_.server_id});
}

void RedisTier::writer_main() {
  Connection c;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
    if (writes_.empty()) break;  // stopping, and every queued write was tried
    std::vector<WriteJob> batch;
    while (!writes_.empty() && batch.size() < kMaxBatch) {
      queued_write_bytes_ -= static_cast<int64_t>(writes_.front().payload.size());
      batch.push_back(std::move(writes_.front()));
      writes_.pop_front();
    }
    writing_ = true;
    num_writes_in_flight_ = batch.size();
    lock.unlock();
    write_batch(c, std::move(batch));
    lock.lock();
    num_writes_in_flight_ = 0;
    if (writes_.empty()) {
      writing_ = false;
      done_.notify_all();
    }
  }
  writing_ = false;
  done_.notify_all();
}

void RedisTier::write_batch(Connection& c, std::vector<WriteJob> jobs) {
  if (!ensure_connected(c, config_.command_timeout)) {
    std::lock_guard lock(mutex_);
    stats_.num_writes_dropped += jobs.size();
    return;
  }
  // One round trip: SET ... PX and the "stored" event of every entry.
  const int64_t now = unix_ms_now();
  std::vector<std::string> names(jobs.size());
  std::vector<size_t> sizes(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const WriteJob& job = jobs[i];
    const int64_t expires = job.header.retention.expires_at_ms;
    const int64_t ttl_ms = expires != 0 ? std::max<int64_t>(expires - now, 1) : config_.default_ttl_ms;
    const std::vector<uint8_t> value = codec_.encode(job.header, job.payload);
    names[i] = codec_.entry_name(job.header.key);
    sizes[i] = value.size();
    const std::string key = std::string(kRedisKeyPrefix) + names[i];
    const std::string px = std::to_string(ttl_ms);
    c.append({"SET", key, std::string_view(reinterpret_cast<const char*>(value.data()), value.size()), "PX", px});
    append_event(c, "stored", names[i], job.header.ns, job.model);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    bool timed_out = false;
    Reply set = c.next(&timed_out);
    Reply event = set ? c.next(&timed_out) : nullptr;
    if (!set || !event) {
      drop(c, timed_out);
      std::lock_guard lock(mutex_);
      stats_.num_writes_dropped += jobs.size() - i;
      return;
    }
    std::lock_guard lock(mutex_);
    connected_ = true;
    if (set->type == REDIS_REPLY_ERROR) {  // OOM (maxmemory with noeviction), READONLY, NOAUTH ...
      stats_.num_errors++;
      continue;
    }
    stats_.num_writes++;
    stats_.num_written_bytes += sizes[i];
    stats_.num_events_published += event->type == REDIS_REPLY_ERROR ? 0 : 1;
    known_insert(codec_.entry_name_digest(jobs[i].header.key));
  }
  done_.notify_all();
}

void RedisTier::reader_main() {
  Connection c;
  std::unique_lock lock(mutex_);
  for (;;) {
    read_work_.wait(lock, [&] { return stopping_ || !loads_.empty(); });
    if (stopping_) break;
    TierLoadJob job = std::move(loads_.front());
    loads_.pop_front();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    TierLoadDone done = do_load(c, job);
    const auto end = std::chrono::steady_clock::now();
    done.seconds = std::chrono::duration<double>(end - job.queued).count();
    lock.lock();
    uint64_t bytes = 0;
    for (const TierBlock& b : done.blocks) bytes += b.payload.size();
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
  for (TierLoadJob& job : loads_) loaded_.add(job.owner, TierLoadDone{job.id, {}, 0});
  loads_.clear();
  done_.notify_all();
}

TierLoadDone RedisTier::do_load(Connection& c, const TierLoadJob& job) {
  TierLoadDone done;
  done.job = job.id;
  if (job.keys.empty() || !ensure_connected(c, config_.command_timeout)) return done;
  // One round trip for the chain. GETRANGE bounds what a value can cost: one past the limit tells "too large".
  const std::string end = std::to_string(config_.max_value_bytes);
  std::vector<std::string> keys;
  for (const BlockHash& k : job.keys) keys.push_back(redis_key(k));
  for (const std::string& k : keys) c.append({"GETRANGE", k, "0", end});
  std::vector<Reply> replies;
  for (size_t i = 0; i < keys.size(); ++i) {
    bool timed_out = false;
    Reply r = c.next(&timed_out);
    if (!r) {
      drop(c, timed_out);
      return done;  // nothing of a half-read pipeline is trusted
    }
    replies.push_back(std::move(r));
  }
  connected_ = true;
  // The leading values that verify are loaded; the first that does not ends the chain. Every missing one is
  // forgotten (a restart or an eviction takes a chain's blocks together), a bad one DELeted and published as removed.
  bool ended = false;
  std::vector<std::string> missing;
  for (size_t i = 0; i < keys.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (r->type == REDIS_REPLY_STRING && r->len == 0) {  // GETRANGE of a missing key is ""
      missing.push_back(keys[i].substr(kRedisKeyPrefix.size()));
      std::lock_guard lock(mutex_);
      stats_.num_missing++;
      known_erase(codec_.entry_name_digest(job.keys[i]));
      ended = true;
    }
    if (ended) continue;
    const std::string name = keys[i].substr(kRedisKeyPrefix.size());
    const BlockHash name_digest = codec_.entry_name_digest(job.keys[i]);
    if (r->type != REDIS_REPLY_STRING) {
      std::lock_guard lock(mutex_);
      stats_.num_errors++;
      ended = true;
      continue;
    }
    std::vector<uint8_t> value(reinterpret_cast<const uint8_t*>(r->str),
                               reinterpret_cast<const uint8_t*>(r->str) + r->len);
    std::optional<Result<TierBlock, TierBlockError>> opened;
    if (static_cast<int64_t>(value.size()) <= config_.max_value_bytes) {
      opened.emplace(codec_.open_block(value, job.keys[i], job.layout));
    }
    if (opened && *opened) {
      done.blocks.push_back(std::move(**opened));
      continue;
    }
    const bool mismatch = opened && (*opened).error().refusal == TierBlockRefusal::kKeyMismatch;
    spdlog::warn("redis tier: {} is corrupt or foreign ({}); deleted", keys[i],
                 opened ? (*opened).error().message : std::string("larger than the value limit"));
    c.append({"DEL", keys[i]});
    append_event(c, "removed", name, BlockHash{}, "");
    bool timed_out = false;
    Reply del = c.next(&timed_out);
    Reply event = del ? c.next(&timed_out) : nullptr;
    if (!del || !event) drop(c, timed_out);
    std::lock_guard lock(mutex_);
    stats_.num_corrupt_removed++;
    stats_.num_key_mismatch_removed += mismatch ? 1 : 0;
    known_erase(name_digest);
    ended = true;
  }
  publish_removed(c, missing);
  return done;
}

void RedisTier::publish_removed(Connection& c, const std::vector<std::string>& names) {
  if (names.empty() || c.ctx == nullptr) return;
  for (const std::string& name : names) append_event(c, "removed", name, BlockHash{}, "");
  for (size_t i = 0; i < names.size(); ++i) {
    bool timed_out = false;
    if (!c.next(&timed_out)) {
      drop(c, timed_out);
      return;
    }
  }
  std::lock_guard lock(mutex_);
  stats_.num_events_published += names.size();
}

void RedisTier::apply_event(std::string_view event, std::string_view name, std::string_view tier) {
  if (tier != "redis") return;
  const std::optional<BlockHash> digest = block_hash_from_hex(name);
  if (!digest) return;
  std::lock_guard lock(mutex_);
  stats_.num_events_read++;
  if (event == "stored") {
    known_insert(*digest);
  } else if (event == "removed") {
    known_erase(*digest);
  }
  done_.notify_all();
}

void RedisTier::events_main() {
  Connection c;
  std::string last_id = "0-0";  // from the stream's start: a (re)started server learns what Redis was given
  uint64_t epoch = 0;           // the Redis process last_id belongs to (redis_epoch_)
  const std::string block = std::to_string(kEventBlockMs);
  const std::string count = std::to_string(kEventBatch);
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (stopping_) return;
    }
    if (!ensure_connected(c, config_.command_timeout + std::chrono::milliseconds(kEventBlockMs))) {
      std::unique_lock lock(mutex_);
      stop_.wait_until(lock, c.retry_at, [&] { return stopping_; });
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      if (epoch != redis_epoch_) last_id = "0-0";  // a new Redis process: its stream from the start
      epoch = redis_epoch_;
    }
    c.append({"XREAD", "COUNT", count, "BLOCK", block, "STREAMS", kRedisEventStream, last_id});
    bool timed_out = false;
    Reply r = c.next(&timed_out);
    if (!r) {
      drop(c, timed_out);
      continue;
    }
    connected_ = true;
    if (r->type == REDIS_REPLY_ERROR) {
      spdlog::warn("redis tier: XREAD refused: {}", reply_str(r.get()));
      drop(c, false);
      continue;
    }
    if (r->type != REDIS_REPLY_ARRAY) continue;  // nil: nothing new within the block time
    for (size_t s = 0; s < r->elements; ++s) {
      const redisReply* stream = r->element[s];
      if (stream->type != REDIS_REPLY_ARRAY || stream->elements != 2) continue;
      const redisReply* entries = stream->element[1];
      for (size_t e = 0; e < entries->elements; ++e) {
        const redisReply* entry = entries->element[e];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) continue;
        last_id = std::string(reply_str(entry->element[0]));
        const redisReply* fields = entry->element[1];
        std::string_view event, name, tier;
        for (size_t f = 0; f + 1 < fields->elements; f += 2) {
          const std::string_view field = reply_str(fields->element[f]);
          const std::string_view value = reply_str(fields->element[f + 1]);
          if (field == "event") event = value;
          if (field == "key") name = value;
          if (field == "tier") tier = value;
        }
        apply_event(event, name, tier);
      }
    }
  }
}

}  // namespace hearth

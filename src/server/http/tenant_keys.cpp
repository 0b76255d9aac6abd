#include "server/http/tenant_keys.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>
#include <sstream>

#include "server/http/serve_access.h"

namespace hearth::server {
namespace {

constexpr std::string_view kBlanks = " \t\r";
constexpr std::string_view kTenantSaltTag = std::string_view("\0tenant\0", 8);

Sha256Digest key_digest(std::string_view key) {
  Sha256 h;
  h.update(key.data(), key.size());
  return h.finish();
}

// The fields of one line up to a comment: runs of non-blank bytes; a field that starts with '#' ends the line.
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (true) {
    const size_t begin = line.find_first_not_of(kBlanks, pos);
    if (begin == std::string_view::npos || line[begin] == '#') break;
    const size_t end = std::min(line.find_first_of(kBlanks, begin), line.size());
    fields.push_back(line.substr(begin, end - begin));
    pos = end;
  }
  return fields;
}

bool valid_tenant_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenantNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

// A "name=value" limit field into `limits`; an error message (without the line) when it is not one.
std::optional<std::string> parse_limit(std::string_view field, TenantLimits& limits) {
  const size_t eq = field.find('=');
  const std::string_view name = field.substr(0, eq);
  if (eq == std::string_view::npos || name != "max_concurrent") {
    return fmt::format("unknown field '{}' (a line is KEY TENANT [max_concurrent=N])", field.substr(0, 64));
  }
  const std::string_view value = field.substr(eq + 1);
  int32_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 1) {
    return fmt::format("max_concurrent must be a whole number of at least 1, not '{}'", value.substr(0, 64));
  }
  limits.max_concurrent = n;
  return std::nullopt;
}

// Gives one slot of a tenant back when destroyed (made in place: a copy would give it back twice).
class SlotRelease {
 public:
  explicit SlotRelease(std::function<void()> release) : release_(std::move(release)) {}
  SlotRelease(const SlotRelease&) = delete;
  SlotRelease& operator=(const SlotRelease&) = delete;
  ~SlotRelease() { release_(); }

 private:
  std::function<void()> release_;
};

// A response source that keeps a tenant's slot until the transport drops it (the response has been sent, or the
// client left).
class HoldingSource final : public ResponseSource {
 public:
  HoldingSource(std::shared_ptr<ResponseSource> inner, std::shared_ptr<void> slot)
      : inner_(std::move(inner)), slot_(std::move(slot)) {}
  void start(std::function<void()> wake) override { inner_->start(std::move(wake)); }
  Chunk pull() override { return inner_->pull(); }
  void cancel() override { inner_->cancel(); }
  std::chrono::milliseconds keep_alive_interval() const override { return inner_->keep_alive_interval(); }
  std::string keep_alive() override { return inner_->keep_alive(); }

 private:
  std::shared_ptr<ResponseSource> inner_;
  std::shared_ptr<void> slot_;
};

}  // namespace

Result<TenantTable> TenantTable::parse(std::string_view text, std::string_view source) {
  TenantTable table;
  std::map<Sha256Digest, int> line_of_key;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty()) continue;
    if (fields.size() < 2) return make_error("{} line {}: a line is KEY TENANT [max_concurrent=N]", source, n);
    if (fields[0].size() < kMinKeyLength) {
      return make_error("{} line {}: the key is shorter than {} characters", source, n, kMinKeyLength);
    }
    if (!valid_tenant_name(fields[1])) {
      return make_error("{} line {}: the tenant name '{}' is not 1 to {} of A-Z a-z 0-9 _ . -", source, n,
                        fields[1].substr(0, 80), kMaxTenantNameLength);
    }
    const Sha256Digest digest = key_digest(fields[0]);
    if (auto [it, fresh] = line_of_key.emplace(digest, n); !fresh) {
      return make_error("{} line {}: the same key is already given on line {}", source, n, it->second);
    }
    const std::string tenant(fields[1]);
    TenantLimits limits;
    for (size_t i = 2; i < fields.size(); ++i) {
      if (auto bad = parse_limit(fields[i], limits)) return make_error("{} line {}: {}", source, n, *bad);
    }
    if (auto [it, fresh] = table.limits_.emplace(tenant, limits); !fresh && fields.size() > 2) {
      it->second = limits;  // the last line with limits for a tenant gives them
    }
    table.entries_.push_back({digest, tenant});
  }
  if (table.entries_.empty()) return make_error("{}: no keys (a line is KEY TENANT [max_concurrent=N])", source);
  return table;
}

Result<TenantTable> TenantTable::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read the API keys file {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

const std::string* TenantTable::find(std::string_view given) const {
  const Sha256Digest digest = key_digest(given);
  size_t found = entries_.size();  // none
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int differs = CRYPTO_memcmp(digest.data(), entries_[i].key_digest.data(), digest.size());
    // All ones when equal, else zero: the index is chosen without a branch on the comparison.
    const size_t mask = static_cast<size_t>(0) - static_cast<size_t>(differs == 0);
    found = (found & ~mask) | (i & mask);
  }
  return found < entries_.size() ? &entries_[found].tenant : nullptr;
}

TenantLimits TenantTable::limits(const std::string& tenant) const {
  auto it = limits_.find(tenant);
  return it == limits_.end() ? TenantLimits{} : it->second;
}

std::vector<std::string> TenantTable::tenants() const {
  std::vector<std::string> out;
  for (const auto& [name, limits] : limits_) out.push_back(name);
  return out;
}

Result<std::shared_ptr<TenantKeys>> TenantKeys::open(std::string path) {
  auto table = TenantTable::load(path);
  if (!table) return table.error();
  return std::make_shared<TenantKeys>(std::move(path), std::move(*table));
}

TenantKeys::TenantKeys(std::string path, TenantTable table)
    : path_(std::move(path)), table_(std::make_shared<const TenantTable>(std::move(table))) {}

Result<void> TenantKeys::reload() {
  auto table = TenantTable::load(path_);
  if (!table) return table.error();
  auto fresh = std::make_shared<const TenantTable>(std::move(*table));
  std::lock_guard lock(mutex_);
  table_ = std::move(fresh);
  return {};
}

std::shared_ptr<const TenantTable> TenantKeys::table() const {
  std::lock_guard lock(mutex_);
  return table_;
}

std::optional<std::shared_ptr<void>> TenantKeys::try_acquire(const std::string& tenant) {
  std::lock_guard lock(mutex_);
  const int32_t max = table_->limits(tenant).max_concurrent;
  if (max <= 0) return std::shared_ptr<void>();
  int32_t& n = in_flight_[tenant];
  if (n >= max) return std::nullopt;
  ++n;
  // The release goes through this object's mutex; the server keeps the TenantKeys alive as long as its routes.
  auto release = [this, tenant] {
    std::lock_guard guard(mutex_);
    if (auto it = in_flight_.find(tenant); it != in_flight_.end() && --it->second <= 0) in_flight_.erase(it);
  };
  return std::static_pointer_cast<void>(std::make_shared<SlotRelease>(std::move(release)));
}

std::optional<std::string> authenticate(const HttpRequest& req, std::string_view api_key, const TenantKeys* tenants) {
  const auto header = req.header("Authorization");
  const auto x_api_key = req.header("x-api-key");
  if (tenants == nullptr) {
    if (api_key.empty()) return std::string();
    if (header && bearer_matches(*header, api_key)) return std::string();
    if (x_api_key && api_key_matches(*x_api_key, api_key)) return std::string();
    return std::nullopt;
  }
  const std::shared_ptr<const TenantTable> table = tenants->table();
  if (header) {
    if (auto given = bearer_credentials(*header)) {
      if (const std::string* tenant = table->find(*given)) return *tenant;
    }
  }
  if (x_api_key) {
    if (const std::string* tenant = table->find(*x_api_key)) return *tenant;
  }
  return std::nullopt;
}

HttpResponse hold_until_sent(HttpResponse res, std::shared_ptr<void> slot) {
  if (slot && res.source) res.source = std::make_shared<HoldingSource>(std::move(res.source), std::move(slot));
  return res;
}

std::string tenant_cache_salt(std::string_view tenant, std::string_view client_salt) {
  std::string out;
  if (tenant.empty()) {
    if (!client_salt.empty() && client_salt.front() == '\0') out.push_back('\0');
  } else {
    out.append(kTenantSaltTag).append(tenant).push_back('\0');
  }
  out.append(client_salt);
  return out;
}

std::string_view tenant_of_cache_salt(std::string_view salt) {
  if (!salt.starts_with(kTenantSaltTag)) return {};
  salt.remove_prefix(kTenantSaltTag.size());
  return salt.substr(0, salt.find('\0'));
}

}  // namespace hearth::server

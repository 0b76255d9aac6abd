#pragma once
// Tenants by key (`hearth serve --api-keys FILE`, docs/tenants.md). Each line of the file gives one API key and the
// tenant it belongs to, with optional limits:
//
//   # comment                      (a field that starts with '#' starts a comment, to the end of the line)
//   KEY  TENANT  [max_concurrent=N]
//
// A key is any run of at least kMinKeyLength non-blank bytes that does not start with '#'; a tenant is 1..64 of
// [A-Za-z0-9_.-]. A tenant may have several keys (rotation); a key belongs to one tenant only. Any other field, a
// short key, a repeated key or a bad tenant name is an error naming its line, and the whole file is refused.
//
// The tenant is the caller's cache namespace: tenant_cache_salt() folds it into the cache_salt every route hands
// the engine, answer memory, the Responses store, pins and the per-tenant counters, so two tenants never share a
// block, an answer, a stored response or a pin, on disk either; a client's own cache_salt narrows within its tenant.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_types.h"
#include "util/result.h"
#include "util/sha256.h"

namespace hearth::server {

inline constexpr size_t kMinKeyLength = 8;
inline constexpr size_t kMaxTenantNameLength = 64;

struct TenantLimits {
  int32_t max_concurrent = 0;  // requests in flight at once (any endpoint); one more is answered 429. 0: no limit
};

// One parsed file: immutable, looked up from any thread.
class TenantTable {
 public:
  // Parses the text of a keys file; `source` names it in errors ("FILE line N: ...").
  [[nodiscard]] static Result<TenantTable> parse(std::string_view text, std::string_view source);
  // Reads and parses the file at `path`.
  [[nodiscard]] static Result<TenantTable> load(const std::string& path);

  // The tenant whose key `given` is, or nullptr. Compares the SHA-256 of `given` with every key's in constant time
  // (CRYPTO_memcmp) and never stops at a match or a mismatch, so the time tells neither which key matched nor how
  // much of one did.
  [[nodiscard]] const std::string* find(std::string_view given) const;
  // The limits of `tenant` (none for an unknown tenant).
  [[nodiscard]] TenantLimits limits(const std::string& tenant) const;
  size_t num_keys() const { return entries_.size(); }
  // The distinct tenants, sorted.
  [[nodiscard]] std::vector<std::string> tenants() const;

 private:
  struct Entry {
    Sha256Digest key_digest{};
    std::string tenant;
  };
  std::vector<Entry> entries_;
  std::map<std::string, TenantLimits> limits_;
};

// The live table of a server, re-read on SIGHUP: reload() swaps it atomically, and a file that does not parse
// keeps the old table. Also counts each tenant's requests in flight for max_concurrent. Any thread.
class TenantKeys {
 public:
  // Loads `path`; fails with the file's first error.
  [[nodiscard]] static Result<std::shared_ptr<TenantKeys>> open(std::string path);
  explicit TenantKeys(std::string path, TenantTable table);

  // Re-reads the file. On success the new table serves every request that starts after; on failure the old one
  // stays and the error says why (the caller logs it).
  [[nodiscard]] Result<void> reload();
  [[nodiscard]] std::shared_ptr<const TenantTable> table() const;
  const std::string& path() const { return path_; }

  // Takes one of `tenant`'s max_concurrent slots: a handle that gives it back when the last copy is destroyed (null
  // when the tenant has no limit), or nullopt when every slot is taken.
  [[nodiscard]] std::optional<std::shared_ptr<void>> try_acquire(const std::string& tenant);

 private:
  std::string path_;
  mutable std::mutex mutex_;
  std::shared_ptr<const TenantTable> table_;  // guarded by mutex_
  std::map<std::string, int32_t> in_flight_;  // guarded by mutex_; by tenant
};

// The caller of `req` by its key: the tenant (empty without --api-keys), or nullopt when the key is missing or not
// known. `api_key` is the single --api-key (empty: none); with neither, everyone is let in without a tenant.
[[nodiscard]] std::optional<std::string> authenticate(const HttpRequest& req, std::string_view api_key,
                                                      const TenantKeys* tenants);

// Keeps `slot` (TenantKeys::try_acquire) held until `res` has been sent: a streamed response's source holds it until
// the transport drops it; a whole response releases it when the returned value is destroyed.
[[nodiscard]] HttpResponse hold_until_sent(HttpResponse res, std::shared_ptr<void> slot);

// The cache_salt the engine and every per-tenant store see for a client's `client_salt` sent by `tenant`:
//   tenant empty  → the client's salt as sent (a salt that starts with NUL gets one more NUL in front)
//   tenant T      → "\0tenant\0" T "\0" client_salt
// Injective over (tenant, salt) pairs, and no client salt without a tenant can spell a tenant's: a disk tier
// written under --api-keys cannot be read by a client after a restart without it.
[[nodiscard]] std::string tenant_cache_salt(std::string_view tenant, std::string_view client_salt);
// The tenant a salt made by tenant_cache_salt belongs to (empty for none).
[[nodiscard]] std::string_view tenant_of_cache_salt(std::string_view salt);
// tenant_cache_salt for the caller of `req` (HttpRequest::tenant).
[[nodiscard]] inline std::string scoped_cache_salt(const HttpRequest& req, std::string_view client_salt) {
  return tenant_cache_salt(req.tenant, client_salt);
}

}  // namespace hearth::server

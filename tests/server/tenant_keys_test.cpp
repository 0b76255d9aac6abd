// Tenants by key (server/http/tenant_keys.h): the --api-keys file format and its line-numbered errors, the lookup
// (every key, never a near miss), authentication from both headers, max_concurrent slots, reload keeping the old
// table on a broken file, and the namespace a tenant's cache_salt becomes. Through a real server: e2e/tenants.test.mjs.

#include "server/http/tenant_keys.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kv/block_hash.h"
#include "server/observe/metrics.h"

namespace hearth::server {
namespace {

constexpr std::string_view kFile = R"(# the household
sk-alice-0123456789   alice
sk-alice-rotated-0001 alice   # a second key of alice
  sk-bob-0123456789	bob max_concurrent=2

sk-carol-0123456789 carol.family-2
)";

TEST(TenantTable, ParsesKeysTenantsCommentsAndLimits) {
  auto table = TenantTable::parse(kFile, "keys");
  ASSERT_TRUE(table) << table.error().message;
  EXPECT_EQ(table->num_keys(), 4u);
  EXPECT_EQ(table->tenants(), (std::vector<std::string>{"alice", "bob", "carol.family-2"}));
  EXPECT_EQ(table->limits("bob").max_concurrent, 2);
  EXPECT_EQ(table->limits("alice").max_concurrent, 0);
  EXPECT_EQ(table->limits("nobody").max_concurrent, 0);
}

TEST(TenantTable, BadLinesAreRefusedWithTheirLineNumber) {
  struct Case {
    std::string text;
    std::string error;
  };
  const Case cases[] = {
      {"sk-alice-0123456789\n", "keys line 1: a line is KEY TENANT"},
      {"# c\n\nsk-alice-0123456789 alice\nshort bob\n", "keys line 4: the key is shorter than 8 characters"},
      {"sk-alice-0123456789 alice\nsk-alice-0123456789 bob\n", "keys line 2: the same key is already given on line 1"},
      {"sk-alice-0123456789 al/ice\n", "keys line 1: the tenant name 'al/ice' is not"},
      {"sk-alice-0123456789 " + std::string(65, 'a') + "\n", "keys line 1: the tenant name"},
      {"sk-alice-0123456789 alice rate=5\n", "keys line 1: unknown field 'rate=5'"},
      {"sk-alice-0123456789 alice max_concurrent\n", "keys line 1: unknown field 'max_concurrent'"},
      {"sk-alice-0123456789 alice max_concurrent=0\n", "keys line 1: max_concurrent must be a whole number"},
      {"sk-alice-0123456789 alice max_concurrent=2x\n", "keys line 1: max_concurrent must be a whole number"},
      {"# only comments\n\n", "keys: no keys"},
      {"", "keys: no keys"},
  };
  for (const Case& c : cases) {
    auto table = TenantTable::parse(c.text, "keys");
    ASSERT_FALSE(table) << c.text;
    EXPECT_NE(table.error().message.find(c.error), std::string::npos) << table.error().message;
  }
}

TEST(TenantTable, FindsEveryKeyAndNoNearMiss) {
  auto table = TenantTable::parse(kFile, "keys");
  ASSERT_TRUE(table);
  const std::pair<std::string, std::string> hits[] = {{"sk-alice-0123456789", "alice"},
                                                      {"sk-alice-rotated-0001", "alice"},
                                                      {"sk-bob-0123456789", "bob"},
                                                      {"sk-carol-0123456789", "carol.family-2"}};
  for (const auto& [key, tenant] : hits) {
    const std::string* found = table->find(key);
    ASSERT_NE(found, nullptr) << key;
    EXPECT_EQ(*found, tenant);
  }
  for (std::string_view miss : {"", "sk-alice-012345678", "sk-alice-01234567890", "SK-ALICE-0123456789", "alice",
                                "sk-bob-0123456789 ", "# the household"}) {
    EXPECT_EQ(table->find(miss), nullptr) << miss;
  }
}

HttpRequest with_headers(std::vector<std::pair<std::string, std::string>> headers) {
  HttpRequest req;
  req.method = "GET";
  req.path = "/v1/models";
  req.headers = std::move(headers);
  return req;
}

TEST(TenantKeys, AuthenticateNamesTheTenantFromEitherHeader) {
  auto table = TenantTable::parse(kFile, "keys");
  ASSERT_TRUE(table);
  TenantKeys keys("keys", std::move(*table));
  EXPECT_EQ(authenticate(with_headers({{"Authorization", "Bearer sk-bob-0123456789"}}), "", &keys), "bob");
  EXPECT_EQ(authenticate(with_headers({{"authorization", "bearer   sk-alice-rotated-0001"}}), "", &keys), "alice");
  EXPECT_EQ(authenticate(with_headers({{"x-api-key", "sk-carol-0123456789"}}), "", &keys), "carol.family-2");
  EXPECT_EQ(authenticate(with_headers({{"Authorization", "Basic sk-bob-0123456789"}}), "", &keys), std::nullopt);
  EXPECT_EQ(authenticate(with_headers({{"Authorization", "Bearer sk-nobody-0123"}}), "", &keys), std::nullopt);
  EXPECT_EQ(authenticate(with_headers({}), "", &keys), std::nullopt);
  // Without tenants: the one --api-key, or no authentication at all; no tenant either way.
  EXPECT_EQ(authenticate(with_headers({{"x-api-key", "single-key-01"}}), "single-key-01", nullptr), "");
  EXPECT_EQ(authenticate(with_headers({{"x-api-key", "other"}}), "single-key-01", nullptr), std::nullopt);
  EXPECT_EQ(authenticate(with_headers({}), "", nullptr), "");
}

TEST(TenantKeys, MaxConcurrentSlotsAreTakenAndGivenBack) {
  auto table = TenantTable::parse(kFile, "keys");
  ASSERT_TRUE(table);
  TenantKeys keys("keys", std::move(*table));
  auto unlimited = keys.try_acquire("alice");
  ASSERT_TRUE(unlimited);
  EXPECT_EQ(*unlimited, nullptr);  // no limit: nothing to hold
  auto first = keys.try_acquire("bob");
  auto second = keys.try_acquire("bob");
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(keys.try_acquire("bob"));
  second->reset();
  auto third = keys.try_acquire("bob");
  ASSERT_TRUE(third);
  EXPECT_FALSE(keys.try_acquire("bob"));
  // A streamed response keeps its slot until the source is dropped.
  HttpResponse streamed;
  class Source final : public ResponseSource {
    void start(std::function<void()>) override {}
    Chunk pull() override { return {}; }
    void cancel() override {}
  };
  streamed.source = std::make_shared<Source>();
  HttpResponse held = hold_until_sent(std::move(streamed), std::move(*third));
  third->reset();
  first->reset();
  auto fourth = keys.try_acquire("bob");
  ASSERT_TRUE(fourth);
  EXPECT_FALSE(keys.try_acquire("bob"));
  held.source.reset();
  EXPECT_TRUE(keys.try_acquire("bob"));
}

TEST(TenantKeys, ReloadSwapsTheTableAndABrokenFileKeepsTheOld) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("hearth-tenant-keys-" + std::to_string(::getpid()));
  const auto write = [&](std::string_view text) { std::ofstream(path, std::ios::trunc) << text; };
  write("sk-alice-0123456789 alice\n");
  auto keys = TenantKeys::open(path.string());
  ASSERT_TRUE(keys) << keys.error().message;
  EXPECT_EQ((*keys)->table()->find("sk-dave-0123456789"), nullptr);
  write("sk-alice-0123456789 alice\nsk-dave-0123456789 dave\n");
  ASSERT_TRUE((*keys)->reload());
  ASSERT_NE((*keys)->table()->find("sk-dave-0123456789"), nullptr);
  const auto before = (*keys)->table();
  write("sk-alice-0123456789 alice\nbroken\n");
  auto failed = (*keys)->reload();
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("line 2"), std::string::npos) << failed.error().message;
  EXPECT_EQ((*keys)->table(), before);
  std::filesystem::remove(path);
  EXPECT_FALSE((*keys)->reload());
  EXPECT_EQ((*keys)->table(), before);
}

TEST(TenantNamespace, SaltsOfTenantsNeverMeetEachOtherOrAClientsOwn) {
  const std::pair<std::string, std::string> inputs[] = {
      {"", ""},
      {"", "household"},
      {"", std::string("\0tenant\0alice\0", 14)},  // a client spelling alice's namespace without a key
      {"", std::string("\0", 1)},
      {"alice", ""},
      {"alice", "household"},
      {"bob", ""},
      {"bob", "household"},
      {"alice", std::string("\0bob", 4)},
      {"ali", "ce"},
  };
  std::vector<std::string> salts;
  for (const auto& [tenant, salt] : inputs) salts.push_back(tenant_cache_salt(tenant, salt));
  for (size_t i = 0; i < salts.size(); ++i) {
    for (size_t j = i + 1; j < salts.size(); ++j) EXPECT_NE(salts[i], salts[j]) << i << " vs " << j;
  }
  EXPECT_EQ(salts[0], "");  // no tenant, no salt: the shared namespace of earlier versions
  EXPECT_EQ(salts[1], "household");
  EXPECT_EQ(tenant_of_cache_salt(salts[5]), "alice");
  EXPECT_EQ(tenant_of_cache_salt(salts[6]), "bob");
  EXPECT_EQ(tenant_of_cache_salt(salts[2]), "");
  EXPECT_EQ(tenant_of_cache_salt(salts[1]), "");

  // The salts become different namespace digests, and so different block keys for the same tokens (disk included).
  const auto digest = [](const std::string& salt) {
    CacheNamespace ns;
    ns.model_fingerprint = "m";
    ns.cache_salt = salt;
    return ns.digest();
  };
  EXPECT_NE(digest(tenant_cache_salt("alice", "household")), digest(tenant_cache_salt("bob", "household")));
  EXPECT_NE(digest(tenant_cache_salt("alice", "")), digest(""));
}

TEST(TenantMetrics, EachTenantReadsOnlyItsOwnSeries) {
  Metrics m;
  m.record_tenant(tenant_cache_salt("alice", ""), 100, 64, 4, "");
  m.record_tenant(tenant_cache_salt("alice", "narrow"), 50, 0, 2, "");
  m.record_tenant(tenant_cache_salt("bob", ""), 10, 0, 1, "");
  m.record_tenant("client-salt", 7, 0, 1, "");  // no tenant: no tenant series
  const std::string alice = m.render(EngineStats{}, KvPlan{}, "alice");
  EXPECT_NE(alice.find("hearth_tenant_requests_total{tenant=\"alice\"} 2\n"), std::string::npos) << alice;
  EXPECT_NE(alice.find("hearth_tenant_prompt_tokens_total{tenant=\"alice\"} 150\n"), std::string::npos);
  EXPECT_NE(alice.find("hearth_tenant_cached_tokens_total{tenant=\"alice\"} 64\n"), std::string::npos);
  EXPECT_EQ(alice.find("bob"), std::string::npos);
  const std::string carol = m.render(EngineStats{}, KvPlan{}, "carol");
  EXPECT_NE(carol.find("hearth_tenant_requests_total{tenant=\"carol\"} 0\n"), std::string::npos);
  EXPECT_EQ(carol.find("alice"), std::string::npos);
  const std::string all = m.render(EngineStats{}, KvPlan{});
  EXPECT_NE(all.find("tenant=\"alice\""), std::string::npos);
  EXPECT_NE(all.find("tenant=\"bob\""), std::string::npos);
  EXPECT_EQ(all.find("client-salt"), std::string::npos);
}

}  // namespace
}  // namespace hearth::server

// The Redis tier against a real redis-server (kv/redis_tier.h): round trip, events between two tiers, faults
// (corrupt, truncated, foreign values; Redis down and restarted empty), sealed entries, AUTH, URLs.
#include "kv/redis_tier.h"

#include <gtest/gtest.h>

#include <thread>

#include "kv/redis_test_server.h"
#include "kv/tier_test_util.h"

namespace hearth {
namespace {

using testing::make_chain;
using testing::RedisTestServer;
using testing::TestChain;

constexpr auto kWait = std::chrono::seconds(5);

BlockHash ns_of(const std::string& salt) {
  CacheNamespace ns;
  ns.model_fingerprint = "redis-test-model";
  ns.cache_salt = salt;
  return ns.digest();
}

std::unique_ptr<RedisTier> open_tier(const RedisTestServer& server, std::shared_ptr<const TierKey> key = nullptr,
                                     std::string password = "") {
  RedisTierConfig c;
  c.url = *parse_redis_url(server.url());
  c.url.password = std::move(password);
  c.seal_key = std::move(key);
  c.server_id = "test:1";
  return RedisTier::open(c);
}

std::vector<BlockHash> keys_of(const TestChain& chain) {
  std::vector<BlockHash> keys;
  for (const auto& h : chain.headers) keys.push_back(h.key);
  return keys;
}

void write_chain(RedisTier& tier, const TestChain& chain) {
  for (size_t i = 0; i < chain.headers.size(); ++i) {
    EXPECT_TRUE(tier.write(chain.headers[i], chain.payloads[i], "test-model"));
  }
  tier.flush();
}

TierLoadDone load_now(RedisTier& tier, std::vector<BlockHash> keys, const std::string& layout = "test-layout") {
  const uint64_t job = tier.load(std::move(keys), layout, 7);
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline) {
    tier.wait_loaded(deadline, 7);
    for (TierLoadDone& d : tier.take_loaded(7)) {
      if (d.job == job) return std::move(d);
    }
  }
  ADD_FAILURE() << "the load did not come back";
  return {};
}

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.installed()) GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  }
  RedisTestServer server_;
  TestChain chain_ = make_chain(ns_of(""), 3, 256);
};

TEST_F(RedisTierTest, RoundTripStoresTheDiskTiersEntryUnderItsKeyWithATtlAndAnEvent) {
  auto tier = open_tier(server_);
  write_chain(*tier, chain_);
  const RedisTierStats st = tier->stats();
  EXPECT_EQ(st.num_writes, 3u);
  EXPECT_EQ(st.num_events_published, 3u);
  EXPECT_TRUE(st.connected);
  for (const auto& h : chain_.headers) EXPECT_TRUE(tier->contains(h.key));
  // The value is exactly the disk tier's plain entry, under hearth:kv:<hex key>, expiring in about 24 h.
  const std::string key = "hearth:kv:" + chain_.headers[0].key.hex();
  const std::vector<uint8_t> entry = encode_tier_entry(chain_.headers[0], chain_.payloads[0]);
  EXPECT_EQ(server_.command({"GET", key}), std::string(entry.begin(), entry.end()));
  const long long ttl = std::stoll(server_.command({"PTTL", key}));
  EXPECT_GT(ttl, 23ll * 3600 * 1000);
  EXPECT_LE(ttl, 24ll * 3600 * 1000);
  EXPECT_EQ(server_.command({"XLEN", "hearth:kv-events"}), "3");

  const TierLoadDone done = load_now(*tier, keys_of(chain_));
  ASSERT_EQ(done.blocks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done.blocks[i].payload, chain_.payloads[i]);
    EXPECT_EQ(done.blocks[i].header.tokens, chain_.headers[i].tokens);
  }
  EXPECT_EQ(tier->stats().num_loaded_blocks, 3u);
  EXPECT_GT(tier->seconds_per_block(), 0);
}

TEST_F(RedisTierTest, ARetentionExpiryBecomesTheKeysTtl) {
  auto tier = open_tier(server_);
  TierEntryHeader h = chain_.headers[0];
  h.retention.expires_at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() +
      60'000;
  EXPECT_TRUE(tier->write(h, chain_.payloads[0], ""));
  tier->flush();
  const long long ttl = std::stoll(server_.command({"PTTL", "hearth:kv:" + h.key.hex()}));
  EXPECT_GT(ttl, 50'000);
  EXPECT_LE(ttl, 60'000);
}

TEST_F(RedisTierTest, ASecondServerLearnsWhatTheFirstStoredFromTheEventStream) {
  auto a = open_tier(server_);
  auto b = open_tier(server_);
  write_chain(*a, chain_);
  ASSERT_TRUE(b->wait_num_known(3, std::chrono::steady_clock::now() + kWait));
  for (const auto& h : chain_.headers) EXPECT_TRUE(b->contains(h.key));
  const TierLoadDone done = load_now(*b, keys_of(chain_));
  ASSERT_EQ(done.blocks.size(), 3u);
  EXPECT_EQ(done.blocks[2].payload, chain_.payloads[2]);
  // A third, started later, reads the stream from its start.
  auto c = open_tier(server_);
  EXPECT_TRUE(c->wait_num_known(3, std::chrono::steady_clock::now() + kWait));
}

TEST_F(RedisTierTest, CorruptTruncatedAndForeignValuesAreCountedDeletedAndNeverLoaded) {
  auto tier = open_tier(server_);
  write_chain(*tier, chain_);
  // Block 1: one payload bit flipped.
  const std::string key1 = "hearth:kv:" + chain_.headers[1].key.hex();
  std::string value = server_.command({"GET", key1});
  value[value.size() - 20] ^= 1;
  server_.command({"SET", key1, value});
  TierLoadDone done = load_now(*tier, keys_of(chain_));
  EXPECT_EQ(done.blocks.size(), 1u);
  EXPECT_EQ(server_.command({"EXISTS", key1}), "0");
  EXPECT_EQ(tier->stats().num_corrupt_removed, 1u);
  EXPECT_FALSE(tier->contains(chain_.headers[1].key));

  // Block 0: truncated.
  const std::string key0 = "hearth:kv:" + chain_.headers[0].key.hex();
  value = server_.command({"GET", key0});
  server_.command({"SET", key0, value.substr(0, value.size() / 2)});
  done = load_now(*tier, {chain_.headers[0].key});
  EXPECT_TRUE(done.blocks.empty());
  EXPECT_EQ(server_.command({"EXISTS", key0}), "0");
  EXPECT_EQ(tier->stats().num_corrupt_removed, 2u);

  // Block 2: a well-formed entry of another salt's block under its key (foreign): never loaded.
  const TestChain other = make_chain(ns_of("someone-else"), 3, 256);
  const std::vector<uint8_t> foreign = encode_tier_entry(other.headers[2], other.payloads[2]);
  const std::string key2 = "hearth:kv:" + chain_.headers[2].key.hex();
  server_.command({"SET", key2, std::string(foreign.begin(), foreign.end())});
  done = load_now(*tier, {chain_.headers[2].key});
  EXPECT_TRUE(done.blocks.empty());
  EXPECT_EQ(server_.command({"EXISTS", key2}), "0");
  EXPECT_EQ(tier->stats().num_corrupt_removed, 3u);

  // Another layout (another model's KV shape) under the right key: never loaded either.
  write_chain(*tier, make_chain(ns_of("layout"), 1, 64, 1, "other-layout"));
  done = load_now(*tier, {make_chain(ns_of("layout"), 1, 64).headers[0].key});
  EXPECT_TRUE(done.blocks.empty());
  EXPECT_EQ(tier->stats().num_corrupt_removed, 4u);
}

TEST_F(RedisTierTest, TwoSaltsNeverReadEachOthersBlocks) {
  auto tier = open_tier(server_);
  const TestChain alice = make_chain(ns_of("alice"), 2, 128);
  const TestChain bob = make_chain(ns_of("bob"), 2, 128);  // the same tokens
  ASSERT_EQ(alice.headers[0].tokens, bob.headers[0].tokens);
  write_chain(*tier, alice);
  EXPECT_TRUE(tier->contains(alice.headers[0].key));
  EXPECT_FALSE(tier->contains(bob.headers[0].key));
  EXPECT_TRUE(load_now(*tier, keys_of(bob)).blocks.empty());
  EXPECT_EQ(load_now(*tier, keys_of(alice)).blocks.size(), 2u);
}

TEST_F(RedisTierTest, RedisDownDropsAndCountsThenRestartedEmptyIsMissingAndRefilled) {
  auto tier = open_tier(server_);
  write_chain(*tier, chain_);
  server_.stop();
  const TierLoadDone down = load_now(*tier, keys_of(chain_));
  EXPECT_TRUE(down.blocks.empty());
  const TestChain more = make_chain(ns_of("more"), 1, 64);
  tier->write(more.headers[0], more.payloads[0], "");
  tier->flush();
  RedisTierStats st = tier->stats();
  EXPECT_FALSE(st.connected);
  EXPECT_GE(st.num_errors + st.num_timeouts, 1u);
  EXPECT_GE(st.num_writes_dropped, 1u);

  server_.start();  // empty
  TierLoadDone after;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline && tier->stats().num_missing == 0) {
    after = load_now(*tier, keys_of(chain_));  // within the backoff, comes back empty at once
  }
  EXPECT_TRUE(after.blocks.empty());
  EXPECT_EQ(tier->stats().num_missing, 3u);  // the whole chain: all three are forgotten
  EXPECT_EQ(tier->stats().num_restarts_seen, 1u);
  for (const auto& h : chain_.headers) EXPECT_FALSE(tier->contains(h.key));
  // A recompute writes the chain again. The writer, up before the stop, drops writes until its backoff (at most
  // max_backoff after its last refused attempt) lets it reconnect, which it counts; then the chain loads.
  const auto refill_deadline = std::chrono::steady_clock::now() + RedisTierConfig{}.max_backoff + kWait;
  size_t reloaded = 0;
  while (std::chrono::steady_clock::now() < refill_deadline && reloaded < 3) {
    write_chain(*tier, chain_);
    reloaded = load_now(*tier, keys_of(chain_)).blocks.size();
    if (reloaded < 3) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(reloaded, 3u);
  EXPECT_GE(tier->stats().num_reconnects, 1u);
}

TEST_F(RedisTierTest, SealedEntriesAreNamedByHmacAndAPlainTierRemovesThem) {
  std::array<uint8_t, kTierKeyBytes> secret{};
  secret.fill(0x5a);
  auto key = TierKey::from_secret(secret);
  auto sealed = open_tier(server_, key);
  write_chain(*sealed, chain_);
  EXPECT_EQ(server_.command({"EXISTS", "hearth:kv:" + chain_.headers[0].key.hex()}), "0");
  const std::string name = "hearth:kv:" + key->entry_name(chain_.headers[0].key);
  EXPECT_EQ(server_.command({"EXISTS", name}), "1");
  ASSERT_EQ(load_now(*sealed, keys_of(chain_)).blocks.size(), 3u);
  // A plain tier that reads a sealed value under its own name finds it foreign.
  const std::string plain_name = "hearth:kv:" + chain_.headers[0].key.hex();
  server_.command({"RENAME", name, plain_name});
  auto plain = open_tier(server_);
  EXPECT_TRUE(load_now(*plain, {chain_.headers[0].key}).blocks.empty());
  EXPECT_EQ(plain->stats().num_key_mismatch_removed, 1u);
}

TEST(RedisTierSlow, ACommandPastTheTimeoutIsCountedAndTheLoadComesBackEmpty) {
  RedisTestServer server({"--enable-debug-command", "local"});
  if (!server.installed()) GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  const TestChain chain = make_chain(ns_of(""), 2, 64);
  auto tier = open_tier(server);
  write_chain(*tier, chain);
  // Redis busy for a second (longer than the 300 ms command timeout): the load gives up, counted as a timeout.
  std::thread busy([&] { server.command({"DEBUG", "SLEEP", "1.5"}); });
  TierLoadDone slow;
  const auto start = std::chrono::steady_clock::now();
  while (tier->stats().num_timeouts == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) {
    slow = load_now(*tier, keys_of(chain));  // before the sleep begins, a load still succeeds
  }
  busy.join();
  EXPECT_TRUE(slow.blocks.empty());
  EXPECT_GE(tier->stats().num_timeouts, 1u);
  // Afterwards the tier reconnects and loads again.
  TierLoadDone again;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (again.blocks.empty() && std::chrono::steady_clock::now() < deadline) again = load_now(*tier, keys_of(chain));
  EXPECT_EQ(again.blocks.size(), 2u);
}

TEST(RedisTierAuth, APasswordIsSentAndAWrongOneIsCounted) {
  RedisTestServer server({"--requirepass", "s3cret"});
  if (!server.installed()) GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  const TestChain chain = make_chain(ns_of(""), 1, 64);
  auto good = open_tier(server, nullptr, "s3cret");
  write_chain(*good, chain);
  EXPECT_EQ(good->stats().num_writes, 1u);
  auto bad = open_tier(server, nullptr, "wrong");
  EXPECT_TRUE(load_now(*bad, {chain.headers[0].key}).blocks.empty());
  EXPECT_GE(bad->stats().num_errors, 1u);
}

TEST(RedisUrl, ParsesUserPasswordHostPortDbAndRefusesTls) {
  auto u = parse_redis_url("redis://hearth:p%40ss@cache.lan:6380/2");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->user, "hearth");
  EXPECT_EQ(u->password, "p@ss");
  EXPECT_EQ(u->host, "cache.lan");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  auto p = parse_redis_url("redis://:only@[::1]");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->user, "");
  EXPECT_EQ(p->password, "only");
  EXPECT_EQ(p->host, "::1");
  EXPECT_EQ(p->port, 6379);
  auto tls = parse_redis_url("rediss://cache.lan:6380");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.error().message.find("hiredis 0.14 has no TLS"), std::string::npos);
  EXPECT_NE(tls.error().message.find("tunnel"), std::string::npos);
  EXPECT_FALSE(parse_redis_url("http://cache.lan").ok());
  EXPECT_FALSE(parse_redis_url("redis://cache.lan:notaport").ok());
}

}  // namespace
}  // namespace hearth

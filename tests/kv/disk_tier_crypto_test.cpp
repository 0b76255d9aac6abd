// The disk tier encrypted at rest (--kv-disk-key, kv/tier_seal.h): entries round trip, and their files hold none of
// the token ids, block keys or K/V bytes; an entry of another key, a plain entry with a key set, a sealed entry
// without one, and a tampered byte are each counted, removed and never loaded; key files are read only when they
// are private, well formed and away from the tier.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string_view>

#include "kv/disk_tier.h"
#include "kv/tier_seal.h"
#include "tier_test_util.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using testing::make_chain;

const BlockHash kNs = CacheNamespace{.model_fingerprint = "disk-tier-crypto-test", .cache_salt = "tenant"}.digest();
constexpr int32_t kFirstToken = 1000003;  // distinctive ids: 1000003, 1000004, ... (the tier takes any i32)

std::shared_ptr<const TierKey> key_of(uint8_t seed) {
  std::array<uint8_t, kTierKeyBytes> secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(seed * 37 + i * 11);
  return TierKey::from_secret(secret);
}

std::unique_ptr<DiskTier> open_tier(const fs::path& dir, std::shared_ptr<const TierKey> key) {
  auto tier = DiskTier::open({.dir = dir, .capacity_bytes = 64ll << 20, .seal_key = std::move(key)});
  EXPECT_TRUE(tier.ok()) << tier.error().message;
  return tier.ok() ? std::move(*tier) : nullptr;
}

void write_chain(DiskTier& tier, const testing::TestChain& c) {
  for (size_t i = 0; i < c.headers.size(); ++i) ASSERT_TRUE(tier.write(c.headers[i], c.payloads[i]));
  tier.flush();
}

std::vector<BlockHash> keys_of(const testing::TestChain& c) {
  std::vector<BlockHash> keys;
  for (const auto& h : c.headers) keys.push_back(h.key);
  return keys;
}

TierLoadDone load_now(DiskTier& tier, std::vector<BlockHash> keys) {
  const uint64_t job = tier.load(std::move(keys), "test-layout");
  for (int i = 0; i < 1000; ++i) {
    tier.wait_loaded(std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    for (TierLoadDone& done : tier.take_loaded()) {
      if (done.job == job) return std::move(done);
    }
  }
  ADD_FAILURE() << "load never finished";
  return {};
}

// Every *.kvb file of the tier, sorted.
std::vector<fs::path> entry_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    if (f.path().extension() == ".kvb") out.push_back(f.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string le_u32(uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
}

// Whether any file or file name under `dir` holds `needle`.
bool tier_holds(const fs::path& dir, std::string_view needle) {
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    if (f.path().string().find(needle) != std::string::npos) return true;
    if (f.is_regular_file() && read_file(f.path()).find(needle) != std::string::npos) return true;
  }
  return false;
}

void flip_byte(const fs::path& file, off_t at) {
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
}

TEST(TierSeal, RoundTripsTheWholeEntry) {
  auto chain = make_chain(kNs, 2, 300, kFirstToken);
  chain.headers[1].retention = {90, 1234567};
  const auto key = key_of(1);
  auto sealed = key->seal(chain.headers[1], chain.payloads[1]);
  EXPECT_EQ(sealed.size(), kTierSealFixedBytes + chain.headers[1].file_bytes());
  EXPECT_TRUE(is_sealed_tier_entry(sealed));
  auto header = key->open_header(sealed, sealed.size());
  ASSERT_TRUE(header.ok()) << header.error().message;
  EXPECT_EQ(header->tokens, chain.headers[1].tokens);
  std::span<const uint8_t> payload;
  auto opened = key->open(sealed, &payload);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_EQ(opened->key, chain.headers[1].key);
  EXPECT_EQ(opened->parent_key, chain.headers[0].key);
  EXPECT_EQ(opened->ns, kNs);
  EXPECT_EQ(opened->depth, 1);
  EXPECT_EQ(opened->tokens, chain.headers[1].tokens);
  EXPECT_EQ(opened->layout, "test-layout");
  EXPECT_EQ(opened->written_at_ms, 1);
  EXPECT_EQ(opened->retention.priority, 90);
  EXPECT_EQ(opened->retention.expires_at_ms, 1234567);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), chain.payloads[1].begin(), chain.payloads[1].end()));
}

TEST(TierSeal, EachSealDrawsFreshNonces) {
  const auto chain = make_chain(kNs, 1, 64, kFirstToken);
  const auto key = key_of(1);
  const auto a = key->seal(chain.headers[0], chain.payloads[0]);
  const auto b = key->seal(chain.headers[0], chain.payloads[0]);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_FALSE(std::equal(a.begin() + 40, a.begin() + 52, b.begin() + 40));  // header nonces
  EXPECT_FALSE(std::equal(a.begin() + 68, a.begin() + 80, b.begin() + 68));  // payload nonces
  EXPECT_FALSE(std::equal(a.begin() + kTierSealFixedBytes, a.end(), b.begin() + kTierSealFixedBytes));
}

TEST(TierSeal, EveryFlippedByteOutsideRetentionFailsAndRetentionChangesInPlace) {
  const auto chain = make_chain(kNs, 1, 48, kFirstToken);
  const auto key = key_of(1);
  const auto good = key->seal(chain.headers[0], chain.payloads[0]);
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x04;
    const bool retention = i >= kTierSealRetentionOffset && i < kTierSealRetentionOffset + kTierRetentionBytes;
    // The header segment's tag covers neither the payload's nonce and tag [68, 96) nor its ciphertext.
    const bool payload_only = (i >= 68 && i < 96) || i >= 96 + chain.headers[0].header_bytes();
    EXPECT_EQ(key->open_header(bad, bad.size()).ok(), retention || payload_only) << "byte " << i;
    EXPECT_EQ(key->open(bad, nullptr).ok(), retention) << "byte " << i;  // last: it decrypts in place
  }
}

TEST(TierSeal, AnotherKeyAndAPlainEntryAreKeyMismatches) {
  const auto chain = make_chain(kNs, 1, 48, kFirstToken);
  auto sealed = key_of(1)->seal(chain.headers[0], chain.payloads[0]);
  auto other = key_of(2)->open(sealed, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().problem, TierEntryProblem::kKeyMismatch);
  auto plain = encode_tier_entry(chain.headers[0], chain.payloads[0]);
  auto as_sealed = key_of(1)->open(plain, nullptr);
  ASSERT_FALSE(as_sealed.ok());
  EXPECT_EQ(as_sealed.error().problem, TierEntryProblem::kKeyMismatch);
  EXPECT_FALSE(verify_tier_entry(sealed, nullptr).ok());  // and a reader without a key never takes it for plain
}

TEST(TierSeal, EntryNamesAreKeyedHashesNotBlockKeys) {
  const auto chain = make_chain(kNs, 1, 16, kFirstToken);
  const BlockHash& block = chain.headers[0].key;
  const std::string name = key_of(1)->entry_name(block);
  EXPECT_EQ(name.size(), 64u);
  EXPECT_NE(name, block.hex());
  EXPECT_EQ(name, key_of(1)->entry_name(block));
  EXPECT_NE(name, key_of(2)->entry_name(block));
}

TEST(DiskTierCrypto, WrittenBlocksLoadBackIdenticalAfterAReopenWithTheSameKey) {
  const fs::path dir = testing::fresh_tier_dir("crypto-reopen");
  const auto chain = make_chain(kNs, 3, 1000, kFirstToken);
  {
    auto tier = open_tier(dir, key_of(1));
    write_chain(*tier, chain);
    EXPECT_EQ(tier->stats().num_writes, 3u);
  }
  auto tier = open_tier(dir, key_of(1));  // a restart: the index comes back from the decrypted headers
  EXPECT_EQ(tier->stats().num_entries, 3);
  EXPECT_EQ(tier->num_removed_at_open(), 0u);
  const auto listed = tier->entries(kNs, 10);
  ASSERT_EQ(listed.size(), 3u);
  for (const auto& info : listed) {
    EXPECT_EQ(info.tokens, chain.headers[info.depth].tokens);
    EXPECT_EQ(info.key, chain.headers[info.depth].key);
  }
  const TierLoadDone done = load_now(*tier, keys_of(chain));
  ASSERT_EQ(done.blocks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done.blocks[i].header.key, chain.headers[i].key);
    EXPECT_EQ(done.blocks[i].header.tokens, chain.headers[i].tokens);
    EXPECT_EQ(done.blocks[i].payload, chain.payloads[i]);
  }
  EXPECT_EQ(tier->stats().num_corrupt_removed, 0u);
}

TEST(DiskTierCrypto, TheFilesHoldNoTokenIdNoBlockKeyAndNoKvBytes) {
  const fs::path dir = testing::fresh_tier_dir("crypto-leak");
  const auto chain = make_chain(kNs, 3, 1000, kFirstToken);
  {
    auto tier = open_tier(dir, key_of(1));
    write_chain(*tier, chain);
  }
  ASSERT_EQ(entry_files(dir).size(), 3u);
  for (const auto& h : chain.headers) {
    for (const TokenId t : h.tokens) {
      EXPECT_FALSE(tier_holds(dir, le_u32(static_cast<uint32_t>(t.value)))) << t.value;
      EXPECT_FALSE(tier_holds(dir, std::to_string(t.value))) << t.value;
    }
    for (const BlockHash& k : {h.key, h.parent_key, h.ns}) {
      EXPECT_FALSE(tier_holds(dir, k.hex()));
      EXPECT_FALSE(tier_holds(dir, std::string_view(reinterpret_cast<const char*>(k.bytes.data()), 16)));
    }
    EXPECT_FALSE(tier_holds(dir, h.layout));
  }
  for (const auto& p : chain.payloads) {
    EXPECT_FALSE(tier_holds(dir, std::string_view(reinterpret_cast<const char*>(p.data()) + 100, 16)));
  }
  // The same chain written without a key holds all of them: the checks above can fail.
  const fs::path plain = testing::fresh_tier_dir("crypto-leak-plain");
  {
    auto tier = open_tier(plain, nullptr);
    write_chain(*tier, chain);
  }
  EXPECT_TRUE(tier_holds(plain, le_u32(kFirstToken)));
  EXPECT_TRUE(tier_holds(plain, chain.headers[0].key.hex()));
  EXPECT_TRUE(tier_holds(plain, std::string_view(reinterpret_cast<const char*>(chain.payloads[0].data()) + 100, 16)));
}

TEST(DiskTierCrypto, AnotherKeyLoadsNothingAndItsEntriesAreCountedAndRemoved) {
  const fs::path dir = testing::fresh_tier_dir("crypto-wrong-key");
  const auto chain = make_chain(kNs, 3, 1000, kFirstToken);
  {
    auto tier = open_tier(dir, key_of(1));
    write_chain(*tier, chain);
  }
  auto tier = open_tier(dir, key_of(2));
  for (const auto& h : chain.headers) EXPECT_FALSE(tier->contains(h.key));
  EXPECT_TRUE(load_now(*tier, keys_of(chain)).blocks.empty());
  const DiskTierStats s = tier->stats();
  EXPECT_EQ(s.num_entries, 0);
  EXPECT_EQ(s.num_corrupt_removed, 3u);
  EXPECT_EQ(s.num_key_mismatch_removed, 3u);
  EXPECT_EQ(tier->num_removed_at_open(), 3u);
  EXPECT_TRUE(entry_files(dir).empty());
  write_chain(*tier, chain);  // the tier goes on, under its own key
  EXPECT_EQ(load_now(*tier, keys_of(chain)).blocks.size(), 3u);
}

TEST(DiskTierCrypto, APlainEntryWithAKeyAndASealedEntryWithoutOneAreRemoved) {
  const fs::path dir = testing::fresh_tier_dir("crypto-setting");
  const auto plain = make_chain(kNs, 2, 500, kFirstToken);
  {
    auto tier = open_tier(dir, nullptr);
    write_chain(*tier, plain);
  }
  {
    auto tier = open_tier(dir, key_of(1));
    EXPECT_EQ(tier->stats().num_entries, 0);
    EXPECT_EQ(tier->stats().num_key_mismatch_removed, 2u);
    EXPECT_TRUE(load_now(*tier, keys_of(plain)).blocks.empty());
    write_chain(*tier, plain);
  }
  auto tier = open_tier(dir, nullptr);
  EXPECT_EQ(tier->stats().num_entries, 0);
  EXPECT_EQ(tier->stats().num_corrupt_removed, 2u);
  EXPECT_EQ(tier->stats().num_key_mismatch_removed, 2u);
  EXPECT_TRUE(entry_files(dir).empty());
}

TEST(DiskTierCrypto, ATamperedByteIsSkippedCountedAndRemoved) {
  const fs::path dir = testing::fresh_tier_dir("crypto-tamper");
  const auto chain = make_chain(kNs, 3, 1000, kFirstToken);
  {
    auto tier = open_tier(dir, key_of(1));
    write_chain(*tier, chain);
  }
  // Which file holds which block is the key's secret; the files are the same size, so tamper with them by the
  // order the reopened tier loads them in: the header ciphertext of one (found at open), the payload of another.
  const auto files = entry_files(dir);
  ASSERT_EQ(files.size(), 3u);
  flip_byte(files[0], kTierSealFixedBytes + 20);  // inside the sealed header: the scan authenticates it
  auto tier = open_tier(dir, key_of(1));
  EXPECT_EQ(tier->num_removed_at_open(), 1u);
  EXPECT_EQ(tier->stats().num_key_mismatch_removed, 0u);  // damage, not another key
  EXPECT_EQ(tier->stats().num_entries, 2);
  for (const auto& h : chain.headers) {
    if (!tier->contains(h.key)) continue;
    const std::string name = key_of(1)->entry_name(h.key);
    const auto f = std::find(files.begin(), files.end(), dir / "v1" / name.substr(0, 2) / (name + ".kvb"));
    ASSERT_NE(f, files.end());
    flip_byte(*f, static_cast<off_t>(fs::file_size(*f)) - 300);  // inside the payload: only a load can tell
    EXPECT_TRUE(load_now(*tier, {h.key}).blocks.empty());
    EXPECT_FALSE(tier->contains(h.key));
    break;
  }
  EXPECT_EQ(tier->stats().num_corrupt_removed, 2u);
  EXPECT_EQ(tier->stats().num_key_mismatch_removed, 0u);
  EXPECT_EQ(tier->stats().num_entries, 1);
}

TEST(DiskTierCrypto, RetentionChangesInPlaceAndPersistAcrossAReopen) {
  const fs::path dir = testing::fresh_tier_dir("crypto-retention");
  const auto chain = make_chain(kNs, 1, 1000, kFirstToken);
  {
    auto tier = open_tier(dir, key_of(1));
    write_chain(*tier, chain);
    tier->set_retention(chain.headers[0].key, {kPinnedRetentionPriority, 4242});
  }
  auto tier = open_tier(dir, key_of(1));
  const auto listed = tier->entries(kNs, 10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].retention.priority, kPinnedRetentionPriority);
  EXPECT_EQ(listed[0].retention.expires_at_ms, 4242);
  const TierLoadDone done = load_now(*tier, keys_of(chain));
  ASSERT_EQ(done.blocks.size(), 1u);  // the tags do not cover the retention bytes
  EXPECT_EQ(done.blocks[0].header.retention.priority, kPinnedRetentionPriority);
}

// Writes a key file with `mode` (exactly: chmod after the write) and returns its path.
fs::path key_file(const fs::path& dir, const std::string& name, std::string_view bytes, fs::perms mode) {
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  fs::permissions(path, mode);
  return path;
}

constexpr fs::perms kOwnerRw = fs::perms::owner_read | fs::perms::owner_write;

std::string secret_bytes() {
  std::string s;
  for (int i = 0; i < 32; ++i) s.push_back(static_cast<char>(i * 7 + 3));
  return s;
}

std::string secret_hex() {
  std::string s;
  for (const char c : secret_bytes()) s += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return s;
}

TEST(TierKeyFile, RawBytesAndHexWithOrWithoutANewlineGiveTheSameKey) {
  const fs::path dir = testing::fresh_tier_dir("keyfile-ok");
  const fs::path tier_dir = dir / "kv";
  const BlockHash probe = make_chain(kNs, 1, 16, kFirstToken).headers[0].key;
  std::string upper = secret_hex();
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  std::vector<std::string> names;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"raw", secret_bytes()}, {"hex", secret_hex()}, {"hexnl", secret_hex() + "\n"}, {"upper", upper}}) {
    auto key = load_tier_key(key_file(dir, name, bytes, kOwnerRw), tier_dir);
    ASSERT_TRUE(key.ok()) << name << ": " << key.error().message;
    names.push_back((*key)->entry_name(probe));
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), names[0]), 4);
  std::array<uint8_t, kTierKeyBytes> secret{};
  std::memcpy(secret.data(), secret_bytes().data(), secret.size());
  EXPECT_EQ(TierKey::from_secret(secret)->entry_name(probe), names[0]);
  EXPECT_NE(key_of(9)->entry_name(probe), names[0]);
}

TEST(TierKeyFile, AnythingElseIsRefusedNamingTheFileAndWhatWasExpected) {
  const fs::path dir = testing::fresh_tier_dir("keyfile-bad");
  const fs::path tier_dir = dir / "kv";
  struct Case {
    std::string name;
    std::string bytes;
    std::string want;
  };
  std::string not_hex_nl = secret_hex() + "\n";
  not_hex_nl[0] = ' ';
  const std::vector<Case> cases = {
      {"empty", "", "holds 0 bytes; expected 32 random bytes, or 64 hex digits"},
      {"short", secret_bytes().substr(0, 31), "holds 31 bytes"},
      {"long", secret_bytes() + "x", "holds 33 bytes"},
      {"hex-short", secret_hex().substr(0, 62) + "\n", "holds 63 bytes"},
      {"hex-crlf", secret_hex() + "\r\n", "holds 66 bytes"},
      {"hex-two-newlines", secret_hex() + "\n\n", "holds 66 bytes"},
      {"hex-long", secret_hex() + secret_hex(), "holds 128 bytes"},
      {"not-hex", std::string(63, 'a') + "g", "holds 64 bytes that are not all hex digits"},
      {"not-hex-nl", not_hex_nl, "holds 65 bytes that are not all hex digits"},
  };
  for (const Case& c : cases) {
    const fs::path path = key_file(dir, c.name, c.bytes, kOwnerRw);
    auto key = load_tier_key(path, tier_dir);
    ASSERT_FALSE(key.ok()) << c.name;
    EXPECT_NE(key.error().message.find(path.string()), std::string::npos) << key.error().message;
    EXPECT_NE(key.error().message.find(c.want), std::string::npos) << c.name << ": " << key.error().message;
  }
  auto missing = load_tier_key(dir / "nowhere", tier_dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot open the key file " + (dir / "nowhere").string()), std::string::npos);
  auto directory = load_tier_key(dir, tier_dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("is not a regular file"), std::string::npos) << directory.error().message;
}

TEST(TierKeyFile, AKeyOtherUsersMayAccessIsRefusedAsSshRefusesIt) {
  const fs::path dir = testing::fresh_tier_dir("keyfile-mode");
  using fs::perms;
  for (const perms mode : {kOwnerRw | perms::others_read, kOwnerRw | perms::group_read, kOwnerRw | perms::group_write,
                           perms::owner_read | perms::others_read | perms::group_read}) {
    const fs::path path = key_file(dir, "key", secret_hex(), mode);
    auto key = load_tier_key(path, dir / "kv");
    ASSERT_FALSE(key.ok()) << static_cast<int>(mode);
    EXPECT_NE(key.error().message.find("the key file " + path.string() + " is accessible by other users (mode 0"),
              std::string::npos)
        << key.error().message;
    EXPECT_NE(key.error().message.find("chmod 600"), std::string::npos);
    fs::remove(path);
  }
  EXPECT_TRUE(load_tier_key(key_file(dir, "key", secret_hex(), perms::owner_read), dir / "kv").ok());
}

TEST(TierKeyFile, AKeyInsideTheTierDirectoryIsRefused) {
  const fs::path dir = testing::fresh_tier_dir("keyfile-inside");
  const fs::path tier_dir = dir / "kv";
  fs::create_directories(tier_dir / "v1");
  for (const fs::path& path : {tier_dir / "key", tier_dir / "v1" / "key"}) {
    key_file(path.parent_path(), "key", secret_hex(), kOwnerRw);
    for (const fs::path& given : {tier_dir, fs::path(tier_dir.string() + "/"), tier_dir / "v1" / ".."}) {
      auto key = load_tier_key(path, given);
      ASSERT_FALSE(key.ok()) << path << " in " << given;
      EXPECT_NE(key.error().message.find("lies inside the disk tier directory"), std::string::npos)
          << key.error().message;
    }
  }
  // Through a link: the key file's real place counts.
  fs::create_directory_symlink(tier_dir / "v1", dir / "outside-looking");
  auto linked = load_tier_key(dir / "outside-looking" / "key", tier_dir);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.error().message.find("lies inside"), std::string::npos);
  // Beside the tier (its parent, a sibling whose name starts alike) is fine, and a tier not made yet is compared too.
  EXPECT_TRUE(load_tier_key(key_file(dir, "key", secret_hex(), kOwnerRw), tier_dir).ok());
  fs::create_directories(dir / "kv2");
  EXPECT_TRUE(load_tier_key(key_file(dir / "kv2", "key", secret_hex(), kOwnerRw), tier_dir).ok());
  EXPECT_TRUE(load_tier_key(dir / "kv2" / "key", dir / "kv2" / "not-yet").ok());
  EXPECT_FALSE(load_tier_key(dir / "kv2" / "key", dir).ok());
}

}  // namespace
}  // namespace hearth

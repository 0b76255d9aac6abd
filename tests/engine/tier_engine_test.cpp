// The engine with a disk tier on stories260K: a restart (a new engine and a reopened tier on the same directory)
// loads the prefix back and its logits are bit-identical to a cold run; damage, another KV dtype or another model in
// the directory never load; the load-or-recompute decision follows the measured costs.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/engine.h"
#include "engine/engine_test_util.h"  // tests/engine
#include "engine/kv_tiers.h"
#include "kernels/cpu_isa.h"
#include "kv/disk_tier.h"
#include "kv/tier_seal.h"
#include "model/fingerprint.h"
#include "model/kv_storage.h"
#include "model/synth.h"
#include "util/thread_pool.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using testing::load_model;
using testing::run_to_completion;
using testing::story_tokens;

fs::path fresh_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(HEARTH_TEST_TMP_DIR) / fmt::format("engine-tier-{}-{}-{}", name, info->name(), ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::unique_ptr<DiskTier> open_tier(const fs::path& dir, std::shared_ptr<const TierKey> key = nullptr) {
  auto tier = DiskTier::open({.dir = dir, .capacity_bytes = 64ll << 20, .seal_key = std::move(key)});
  HEARTH_CHECK(tier.ok(), "{}", tier.error().message);
  return std::move(*tier);
}

EngineConfig tier_config(DiskTier* tier, KvFormat format = {}) {
  EngineConfig c;
  c.kv_memory_bytes = 8ll << 20;
  c.kv_format = format;
  c.max_batch_tokens = 64;
  c.disk_tier = tier;
  c.tier_load_policy = TierLoadPolicy::kAlways;
  return c;
}

struct Served {
  std::vector<float> logits;  // of the last prompt token
  std::vector<TokenId> tokens;
  RequestUsage usage;
};

Served serve(Engine& engine, const std::vector<TokenId>& prompt, int32_t max_tokens = 8) {
  Served r;
  bool first = true;
  engine.set_logits_observer([&](RequestId, std::span<const float> row) {
    if (first) r.logits.assign(row.begin(), row.end());
    first = false;
  });
  RequestSpec spec;
  spec.prompt = prompt;
  spec.sampling.temperature = 0;
  spec.max_tokens = max_tokens;
  spec.ignore_eos = true;
  auto id = engine.add_request(spec);
  EXPECT_TRUE(id.ok());
  auto done = run_to_completion(engine);
  r.tokens = done[id->value].tokens;
  r.usage = done[id->value].usage;
  engine.set_logits_observer({});
  return r;
}

class TierEngineTest : public ::testing::Test {
 protected:
  LoadedModel& m_ = load_model(testing::kStories);
  ThreadPool pool_{2};
  std::vector<TokenId> prefix_ = story_tokens(*m_.tokenizer, 100, "Once upon a time");
  std::vector<TokenId> prompt_ = [&] {
    auto p = prefix_;
    for (TokenId t : story_tokens(*m_.tokenizer, 12, "The cat sat on the mat.")) p.push_back(t);
    return p;
  }();

  Served cold() {
    auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(nullptr), pool_);
    return serve(**engine, prompt_);
  }

  // Serves prefix_ once with a tier on `dir`, then "restarts": the engine and the tier are gone afterwards.
  void first_life(const fs::path& dir, KvFormat format = {}, std::shared_ptr<const TierKey> key = nullptr) {
    auto tier = open_tier(dir, std::move(key));
    auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get(), format), pool_);
    serve(**engine, prefix_, 1);
    tier->flush();
    EXPECT_EQ(tier->stats().num_entries, 6);  // 100 prompt tokens: 6 full blocks of 16
  }
};

TEST_F(TierEngineTest, AfterARestartThePrefixLoadsFromDiskBitIdenticalToACold) {
  const fs::path dir = fresh_dir("restart");
  first_life(dir);
  auto tier = open_tier(dir);
  auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get()), pool_);
  const Served warm = serve(**engine, prompt_);
  const Served reference = cold();
  EXPECT_EQ(warm.usage.cached_tokens, 96);
  EXPECT_EQ(warm.usage.tier.found_tokens, 96);
  EXPECT_TRUE(warm.usage.tier.load);
  EXPECT_EQ(warm.usage.tier.loaded_tokens, 96);
  EXPECT_EQ(reference.usage.cached_tokens, 0);
  ASSERT_EQ(warm.logits.size(), reference.logits.size());
  EXPECT_EQ(0, std::memcmp(warm.logits.data(), reference.logits.data(), warm.logits.size() * sizeof(float)));
  EXPECT_EQ(warm.tokens, reference.tokens);
  EXPECT_EQ(tier->stats().num_loaded_blocks, 6u);
  const EngineStats stats = (*engine)->stats();
  ASSERT_TRUE(stats.disk.has_value());
  EXPECT_EQ(stats.tier_link.num_load_decisions, 1u);
  EXPECT_EQ(stats.tier_link.num_loaded_tokens, 96u);
  (*engine)->check_invariants();
}

// A sliding-window model with window slabs (a synthetic gemma3: 5 local layers with an 8-key window, 1 global): a
// tier entry is a whole block, the global layer's K/V from the block and the local layers' from its slab, so after
// a restart the loaded prefix (whose end gets slabs again) is bit-identical to a cold run.
TEST(TierEngineWindow, WindowSlabBlocksRoundTripThroughTheDisk) {
  SynthConfig c;
  c.out_path = (fresh_dir("gemma3-model") / "gemma3.gguf").string();
  c.vocab_from = testing::kStories;
  c.architecture = "gemma3";
  c.dim = 64;
  c.n_layers = 6;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 128;
  c.context_length = 512;
  c.sliding_window = 8;
  c.weight_type = DType::F32;
  c.weight_sd = 0.1f;
  c.num_threads = 2;
  ASSERT_TRUE(write_synthetic_model(c).ok());
  auto loaded = load_model_file(c.out_path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  LoadedModel& m = *loaded;
  ThreadPool pool(2);
  const auto prefix = story_tokens(*m.tokenizer, 100, "Once upon a time");
  auto prompt = prefix;
  for (TokenId t : story_tokens(*m.tokenizer, 12, "The cat sat on the mat.")) prompt.push_back(t);
  const fs::path dir = fresh_dir("gemma3");
  {
    auto tier = open_tier(dir);
    auto engine = Engine::create(*m.model, *m.tokenizer, tier_config(tier.get()), pool);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    ASSERT_GT((*engine)->kv_plan().num_window_slabs, 0);
    serve(**engine, prefix, 1);
    tier->flush();
    EXPECT_EQ(tier->stats().num_entries, 6);
  }
  auto tier = open_tier(dir);
  auto engine = Engine::create(*m.model, *m.tokenizer, tier_config(tier.get()), pool);
  const Served warm = serve(**engine, prompt);
  auto cold_engine = Engine::create(*m.model, *m.tokenizer, tier_config(nullptr), pool);
  const Served reference = serve(**cold_engine, prompt);
  EXPECT_EQ(warm.usage.cached_tokens, 96);
  EXPECT_EQ(warm.usage.tier.loaded_tokens, 96);
  EXPECT_EQ(reference.usage.cached_tokens, 0);
  ASSERT_EQ(warm.logits.size(), reference.logits.size());
  EXPECT_EQ(0, std::memcmp(warm.logits.data(), reference.logits.data(), warm.logits.size() * sizeof(float)));
  EXPECT_EQ(warm.tokens, reference.tokens);
  (*engine)->check_invariants();
}

TEST_F(TierEngineTest, DamagedEntriesAreNeverLoadedAndTheAnswerIsUnchanged) {
  const fs::path dir = fresh_dir("damage");
  first_life(dir);
  int damaged = 0;
  for (const auto& sub : fs::recursive_directory_iterator(dir / "v1")) {
    if (sub.path().extension() != ".kvb") continue;
    // Flip one payload byte of every entry (past the header: only a load's checksum can tell).
    std::fstream f(sub.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(-100, std::ios::end);
    f.write(&c, 1);
    damaged++;
  }
  ASSERT_EQ(damaged, 6);
  auto tier = open_tier(dir);
  auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get()), pool_);
  const Served warm = serve(**engine, prompt_);
  const Served reference = cold();
  EXPECT_EQ(warm.usage.tier.found_tokens, 96);
  EXPECT_EQ(warm.usage.tier.loaded_tokens, 0);
  EXPECT_EQ(warm.usage.cached_tokens, 0);
  EXPECT_EQ(0, std::memcmp(warm.logits.data(), reference.logits.data(), warm.logits.size() * sizeof(float)));
  EXPECT_EQ(warm.tokens, reference.tokens);
  EXPECT_EQ(tier->stats().num_corrupt_removed, 1u);  // the chain stops at the first bad block
  // The request recomputed the blocks and wrote them down again: the next restart is warm.
  tier->flush();
  // Blocks 1-5 are still indexed (their damage is found at their next load), block 0 was written again, and block 6
  // (prompt and answer) is new.
  EXPECT_EQ(tier->stats().num_entries, 5 + 1 + 1);
}

std::shared_ptr<const TierKey> test_key(uint8_t fill) {
  std::array<uint8_t, kTierKeyBytes> secret{};
  secret.fill(fill);
  return TierKey::from_secret(secret);
}

// --kv-disk-key: a restart with the same key is warm and bit-identical to a cold run; with another key nothing loads
// (every entry is counted and removed at open) and the answer is the cold one.
TEST_F(TierEngineTest, WithAKeyARestartIsWarmAndBitIdenticalAndAnotherKeyRecomputes) {
  const fs::path dir = fresh_dir("key");
  first_life(dir, {}, test_key(1));
  const Served reference = cold();
  {
    auto tier = open_tier(dir, test_key(1));
    auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get()), pool_);
    const Served warm = serve(**engine, prompt_);
    EXPECT_EQ(warm.usage.cached_tokens, 96);
    EXPECT_EQ(warm.usage.tier.loaded_tokens, 96);
    ASSERT_EQ(warm.logits.size(), reference.logits.size());
    EXPECT_EQ(0, std::memcmp(warm.logits.data(), reference.logits.data(), warm.logits.size() * sizeof(float)));
    EXPECT_EQ(warm.tokens, reference.tokens);
    EXPECT_EQ(tier->stats().num_corrupt_removed, 0u);
  }
  auto tier = open_tier(dir, test_key(2));
  EXPECT_EQ(tier->stats().num_key_mismatch_removed, 7u);  // the first life's 6 blocks and the prompt's 7th
  auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get()), pool_);
  const Served again = serve(**engine, prompt_);
  EXPECT_EQ(again.usage.tier.found_tokens, 0);
  EXPECT_EQ(again.usage.cached_tokens, 0);
  EXPECT_EQ(0, std::memcmp(again.logits.data(), reference.logits.data(), again.logits.size() * sizeof(float)));
  EXPECT_EQ(again.tokens, reference.tokens);
}

TEST_F(TierEngineTest, AnotherKvDtypeSharesTheDirectoryButNeverItsBlocks) {
  const fs::path dir = fresh_dir("dtype");
  first_life(dir, KvFormat{KvDtype::kF16, KvDtype::kF16});
  auto tier = open_tier(dir);
  auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get(), KvFormat{}), pool_);  // f32
  const Served r = serve(**engine, prompt_);
  EXPECT_EQ(r.usage.tier.found_tokens, 0);
  EXPECT_EQ(r.usage.cached_tokens, 0);
  EXPECT_EQ(tier->stats().num_corrupt_removed, 0u);  // nothing was even tried
}

TEST_F(TierEngineTest, AnotherModelSharesTheDirectoryButNeverItsBlocks) {
  const fs::path dir = fresh_dir("model");
  first_life(dir);
  auto& other = load_model(testing::kShared + "/models/synthetic/synth-tiny-f16.gguf");
  auto tier = open_tier(dir);
  auto engine = Engine::create(*other.model, *other.tokenizer, tier_config(tier.get()), pool_);
  std::vector<TokenId> same_ids;
  for (TokenId t : prompt_) same_ids.push_back(TokenId{t.value % other.tokenizer->vocab_size()});
  const Served r = serve(**engine, same_ids);
  EXPECT_EQ(r.usage.tier.found_tokens, 0);
  EXPECT_EQ(r.usage.cached_tokens, 0);
}

// K/V that other kernels computed (another CPU's ISA level, or a build whose arithmetic differs) gives other bits,
// so a disk tier's blocks from it are never a hit: the namespace includes Model::kernel_arithmetic().
TEST_F(TierEngineTest, AnotherArithmeticSharesTheDirectoryButNeverItsBlocks) {
  const IsaLevel saved = active_isa_level();
  if (saved == IsaLevel::kScalar) GTEST_SKIP() << "this CPU runs the scalar kernels only";
  const fs::path dir = fresh_dir("arithmetic");
  first_life(dir);
  set_isa_level(IsaLevel::kScalar);
  EXPECT_NE(Model::kernel_arithmetic(), std::string(isa_level_name(saved)) + "/n" +
                                            std::to_string(Model::kNumericsVersion));
  auto tier = open_tier(dir);
  auto engine = Engine::create(*m_.model, *m_.tokenizer, tier_config(tier.get()), pool_);
  const Served r = serve(**engine, prompt_);
  set_isa_level(saved);
  EXPECT_EQ(r.usage.tier.found_tokens, 0);
  EXPECT_EQ(r.usage.cached_tokens, 0);
  EXPECT_EQ(tier->stats().num_corrupt_removed, 0u);
}

TEST(ModelFingerprint, CoversTheWeightBytes) {
  std::ifstream in(testing::kStories, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto a = GgufFile::parse(bytes, "a");
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> changed = bytes;
  changed[changed.size() - 7] ^= 1;  // one bit of the last tensor's data: same metadata, same layout
  auto b = GgufFile::parse(changed, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(model_fingerprint(*a), model_fingerprint(*b));
  EXPECT_EQ(model_fingerprint(*a), model_fingerprint(*GgufFile::parse(bytes, "again")));
}

// The decision on its own: KvTiers over a small f32 storage, a pool and a tier holding one 4-block chain.
TEST(TierDecision, LoadsWhenReadingIsFasterThanTheMeasuredPrefillElseRecomputes) {
  const fs::path dir = fresh_dir("decision");
  auto tier = open_tier(dir);
  KvStorage storage(2, 2, 8, 16, 16);
  KvCacheManager kv({.num_blocks = 16, .block_size = 16, .max_pinned_blocks = 4});
  KvTiers tiers(tier.get(), storage, kv, /*n_params=*/1000000);
  const BlockHash ns = CacheNamespace{.model_fingerprint = "decision"}.digest();
  std::vector<TokenId> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(TokenId{i});
  BlockHash parent = ns;
  for (int i = 0; i < 4; ++i) {
    TierEntryHeader h;
    h.tokens.assign(prompt.begin() + 16 * i, prompt.begin() + 16 * (i + 1));
    h.key = hash_block(parent, ns, h.tokens);
    h.parent_key = parent;
    h.ns = ns;
    h.depth = i;
    h.payload_bytes = storage.bytes_per_block();
    h.layout = storage.block_layout();
    parent = h.key;
    ASSERT_TRUE(tier->write(h, std::vector<uint8_t>(storage.bytes_per_block(), 7)));
  }
  tier->flush();
  auto request = [&] {
    Request r;
    r.id = RequestId{1};
    r.tokens = prompt;
    r.num_prompt_tokens = 70;
    r.cache_namespace = ns;
    return r;
  };
  tiers.observe_prefill(1000, 1.0);  // 1,000 tokens/s: 64 tokens cost 64 ms, far more than reading 4 blocks
  Request slow_prefill = request();
  tiers.plan_load(slow_prefill);
  EXPECT_EQ(slow_prefill.tier.found_tokens, 64);
  EXPECT_TRUE(slow_prefill.tier.load);
  EXPECT_TRUE(slow_prefill.tier.waiting);
  EXPECT_NEAR(slow_prefill.tier.est_recompute_ms, 64.0, 1e-9);
  for (int i = 0; i < 20; ++i) tiers.observe_prefill(1000000000, 1.0);  // a billion tokens/s: recompute wins
  Request fast_prefill = request();
  tiers.plan_load(fast_prefill);
  EXPECT_EQ(fast_prefill.tier.found_tokens, 64);
  EXPECT_FALSE(fast_prefill.tier.load);
  EXPECT_FALSE(fast_prefill.tier.waiting);
  EXPECT_EQ(tiers.counters().num_load_decisions, 1u);
  EXPECT_EQ(tiers.counters().num_recompute_decisions, 1u);
}

}  // namespace
}  // namespace hearth

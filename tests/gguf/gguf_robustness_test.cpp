// GgufFile against damaged real files: truncation at every header offset (and sampled data offsets) must be an
// error; random byte flips in the header must give an error or a self-consistent parse. Inputs live in
// exactly-sized heap buffers, so under ASan any read past the end is caught. Seeded, so failures reproduce.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <set>

#include "gguf/describe.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace hearth {
namespace {

using testing::ExactBytes;

const std::string kShared = HEARTH_SHARED_DIR;

// Checks what a successful parse promises: views in bounds, sizes consistent with shapes, unique names.
void expect_consistent(const GgufFile& f, std::span<const uint8_t> bytes) {
  ASSERT_LE(f.data_offset(), bytes.size());
  EXPECT_TRUE(std::has_single_bit(f.alignment()));
  for (const auto& [key, value] : f.metadata()) EXPECT_EQ(f.find(key), &value) << "duplicate key " << key;
  std::set<std::string_view> names;
  for (const GgufTensor& t : f.tensors()) {
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate tensor " << t.name;
    ASSERT_GE(t.n_dims, 1);
    ASSERT_LE(t.n_dims, 4);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d] >= 1 && (d < t.n_dims || t.ne[d] == 1), true);
    ASSERT_EQ(t.ne[0] % dtype_info(t.type).block_size, 0);
    EXPECT_EQ(t.nbytes, row_bytes(t.type, t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3]);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    ASSERT_GE(t.data, bytes.data() + f.data_offset());
    ASSERT_LE(t.nbytes, static_cast<size_t>(bytes.data() + bytes.size() - t.data));
    volatile uint8_t first = t.data[0];
    volatile uint8_t last = t.data[t.nbytes - 1];
    (void)first;
    (void)last;
  }
  EXPECT_FALSE(describe_gguf(f).empty());
}

// Every proper prefix in [begin, end) with the given stride, plus `n_random` prefixes in [random_begin, end).
void expect_truncations_fail(const std::vector<uint8_t>& whole, size_t begin, size_t end, size_t stride,
                             size_t random_begin, int n_random, uint64_t seed) {
  std::vector<size_t> cuts;
  for (size_t n = begin; n < end && n < random_begin; n += stride) cuts.push_back(n);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n_random && random_begin < end; ++i) {
    cuts.push_back(std::uniform_int_distribution<size_t>(random_begin, end - 1)(rng));
  }
  for (size_t n : cuts) {
    ExactBytes prefix(std::span<const uint8_t>(whole.data(), n));
    auto f = GgufFile::parse(prefix.span(), "cut.gguf");
    ASSERT_FALSE(f) << "a file truncated to " << n << " bytes parsed";
    EXPECT_TRUE(f.error().message.starts_with("cut.gguf: at byte ")) << f.error().message;
  }
}

// End of the last byte any tensor occupies: truncating anywhere before it must fail.
size_t tensor_data_end(const GgufFile& f) {
  size_t end = f.data_offset();
  for (const GgufTensor& t : f.tensors()) end = std::max<size_t>(end, f.data_offset() + t.offset + t.nbytes);
  return end;
}

// Flips 1-3 random bytes in [0, limit) per iteration, parses, restores.
void flip_bytes(const std::vector<uint8_t>& whole, size_t limit, int iterations, uint64_t seed) {
  ExactBytes buf(whole);
  std::mt19937_64 rng(seed);
  int parsed = 0;
  for (int it = 0; it < iterations; ++it) {
    std::vector<std::pair<size_t, uint8_t>> saved;
    int n_flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n_flips; ++i) {
      size_t at = rng() % limit;
      saved.emplace_back(at, buf.data()[at]);
      buf.data()[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    auto f = GgufFile::parse(buf.span(), "flip.gguf");
    if (f) {
      ++parsed;
      expect_consistent(*f, buf.span());
    } else {
      EXPECT_TRUE(f.error().message.starts_with("flip.gguf: at byte ")) << f.error().message;
    }
    if (::testing::Test::HasFatalFailure()) FAIL() << "iteration " << it << " seed " << seed;
    for (auto it2 = saved.rbegin(); it2 != saved.rend(); ++it2) buf.data()[it2->first] = it2->second;
  }
  // Both outcomes must occur, or the flips are not exercising the parser.
  EXPECT_GT(parsed, 0);
  EXPECT_LT(parsed, iterations);
}

struct LoadedFile {
  std::vector<uint8_t> bytes;
  size_t data_offset = 0;
  size_t data_end = 0;
};

LoadedFile load(const std::string& path) {
  LoadedFile out;
  out.bytes = testing::read_whole_file(path);
  auto f = GgufFile::parse(out.bytes, path);
  EXPECT_TRUE(f) << (f ? "" : f.error().message);
  if (f) {
    expect_consistent(*f, out.bytes);
    out.data_offset = f->data_offset();
    out.data_end = tensor_data_end(*f);
  }
  return out;
}

TEST(GgufRobustness, Stories260KTruncatedAnywhere) {
  LoadedFile file = load(kShared + "/models/stories260K.gguf");
  ASSERT_GT(file.data_offset, 10000u);
  expect_truncations_fail(file.bytes, 0, file.data_end, 1, file.data_offset, 200, 1);
}

TEST(GgufRobustness, QuantizedModelTruncated) {
  LoadedFile file = load(kShared + "/models/synthetic/synth-tiny-q4_k_m.gguf");
  expect_truncations_fail(file.bytes, 0, file.data_end, 3, file.data_offset, 100, 2);
}

TEST(GgufRobustness, LargeVocabularyTruncated) {
  // 32000 tokens: the whole file is metadata. Every offset of the first 4 KiB, then a sample.
  LoadedFile file = load(kShared + "/vocab/ggml-vocab-llama-spm.gguf");
  expect_truncations_fail(file.bytes, 0, file.bytes.size(), 1, 4096, 40, 3);
}

TEST(GgufRobustness, Stories260KHeaderByteFlips) {
  LoadedFile file = load(kShared + "/models/stories260K.gguf");
  flip_bytes(file.bytes, file.data_offset, 3000, 4);
}

TEST(GgufRobustness, QuantizedModelHeaderByteFlips) {
  LoadedFile file = load(kShared + "/models/synthetic/synth-tiny-q4_k_m.gguf");
  flip_bytes(file.bytes, file.data_offset, 1000, 5);
}

TEST(GgufRobustness, NestedArraysByteFlips) {
  // A small file dense in structure: every value type, nested arrays, several tensors, custom alignment.
  GgufWriter w({.version = 3, .alignment = 64});
  w.add("u8", gguf_uint(GgufType::UINT8, 7));
  w.add("i64", gguf_int(GgufType::INT64, -3));
  w.add("f64", gguf_float(GgufType::FLOAT64, 2.5));
  w.add("b", gguf_bool(true));
  w.add("s", gguf_string("text"));
  GgufValue strings = gguf_string_array({"a", "bb", "ccc"});
  w.add("nested", gguf_array(GgufType::ARRAY, {strings, gguf_array(GgufType::STRING, {}), strings}));
  w.add("deep",
        gguf_array(GgufType::ARRAY, {gguf_array(GgufType::ARRAY, {gguf_array(GgufType::BOOL, {gguf_bool(false)})})}));
  auto zeros = [](size_t n) { return [n](GgufDataSink& s) { return s.write(std::vector<uint8_t>(n, 0)); }; };
  w.add_tensor({"t0", DType::F32, {4, 2}, zeros(32)});
  w.add_tensor({"t1", DType::Q8_0, {32}, zeros(34)});
  w.add_tensor({"t2", DType::F16, {2, 2, 2, 2}, zeros(32)});
  auto bytes = w.write_buffer();
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto f = GgufFile::parse(*bytes, "nested.gguf");
  ASSERT_TRUE(f) << f.error().message;
  flip_bytes(*bytes, f->data_offset(), 3000, 6);
  expect_truncations_fail(*bytes, 0, tensor_data_end(*f), 1, bytes->size(), 0, 7);
}

}  // namespace
}  // namespace hearth

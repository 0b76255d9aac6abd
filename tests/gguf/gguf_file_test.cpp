// GgufFile on valid input: every value type and nested arrays round-trip through GgufWriter (v2 and v3, several
// alignments), typed lookups, and the real files in the shared folder.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "gguf/describe.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace hearth {
namespace {

const std::string kShared = HEARTH_SHARED_DIR;

GgufTensorFill fill_with(std::vector<uint8_t> bytes) {
  return [bytes = std::move(bytes)](GgufDataSink& sink) { return sink.write(bytes); };
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
  return out;
}

// One entry of every scalar type at its extremes, plus arrays (empty, flat, nested three deep).
void add_every_type(GgufWriter& w) {
  w.add("t.u8", gguf_uint(GgufType::UINT8, 255));
  w.add("t.i8", gguf_int(GgufType::INT8, -128));
  w.add("t.u16", gguf_uint(GgufType::UINT16, 65535));
  w.add("t.i16", gguf_int(GgufType::INT16, -32768));
  w.add("t.u32", gguf_uint(GgufType::UINT32, 0xffffffffu));
  w.add("t.i32", gguf_int(GgufType::INT32, std::numeric_limits<int32_t>::min()));
  w.add("t.u64", gguf_uint(GgufType::UINT64, std::numeric_limits<uint64_t>::max()));
  w.add("t.i64", gguf_int(GgufType::INT64, std::numeric_limits<int64_t>::min()));
  w.add("t.f32", gguf_f32(1e-5f));
  w.add("t.f64", gguf_float(GgufType::FLOAT64, M_PI));
  w.add("t.true", gguf_bool(true));
  w.add("t.false", gguf_bool(false));
  w.add("t.str", gguf_string(std::string("h\xc3\xa9llo\0world", 12)));
  w.add("t.empty_str", gguf_string(""));
  w.add("t.empty_arr", gguf_array(GgufType::INT32, {}));
  w.add("t.strs", gguf_string_array({"<unk>", "", "\xe2\x96\x81the"}));
  w.add("t.f32s", gguf_array(GgufType::FLOAT32, {gguf_f32(-1.5f), gguf_f32(0.25f)}));
  w.add("t.i32s", gguf_array(GgufType::INT32, {gguf_int(GgufType::INT32, -7), gguf_int(GgufType::INT32, 9)}));
  w.add("t.u8s", gguf_array(GgufType::UINT8, {gguf_uint(GgufType::UINT8, 1), gguf_uint(GgufType::UINT8, 2)}));
  w.add("t.bools", gguf_array(GgufType::BOOL, {gguf_bool(true), gguf_bool(false)}));
  GgufValue inner = gguf_array(GgufType::STRING, {gguf_string("a"), gguf_string("bc")});
  GgufValue middle = gguf_array(GgufType::ARRAY, {inner, gguf_array(GgufType::STRING, {})});
  w.add("t.nested", gguf_array(GgufType::ARRAY, {middle, middle}));
}

void expect_every_type(const GgufFile& f) {
  EXPECT_EQ(*f.get_uint("t.u8").value(), 255u);
  EXPECT_EQ(std::get<int64_t>(f.find("t.i8")->data), -128);
  EXPECT_EQ(*f.get_uint("t.u16").value(), 65535u);
  EXPECT_EQ(std::get<int64_t>(f.find("t.i16")->data), -32768);
  EXPECT_EQ(*f.get_uint("t.u32").value(), 0xffffffffu);
  EXPECT_EQ(std::get<int64_t>(f.find("t.i32")->data), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*f.get_uint("t.u64").value(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(std::get<int64_t>(f.find("t.i64")->data), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.get_float("t.f32").value(), double{1e-5f});
  EXPECT_EQ(*f.get_float("t.f64").value(), M_PI);
  EXPECT_EQ(*f.get_bool("t.true").value(), true);
  EXPECT_EQ(*f.get_bool("t.false").value(), false);
  EXPECT_EQ(*f.get_string("t.str").value(), std::string("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(*f.get_string("t.empty_str").value(), "");
  EXPECT_TRUE(f.get_int_array("t.empty_arr").value().empty());
  EXPECT_EQ(f.get_string_array("t.strs").value(), (std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(f.get_float_array("t.f32s").value(), (std::vector<float>{-1.5f, 0.25f}));
  EXPECT_EQ(f.get_int_array("t.i32s").value(), (std::vector<int64_t>{-7, 9}));
  EXPECT_EQ(f.get_int_array("t.u8s").value(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(gguf_value_to_string(*f.find("t.bools")), "[true, false]");
  EXPECT_EQ(gguf_value_to_string(*f.find("t.nested")), R"([[["a", "bc"], []], [["a", "bc"], []]])");
  const GgufValue* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = *std::get<std::shared_ptr<GgufArray>>(nested->data);
  EXPECT_EQ(outer.elem_type, GgufType::ARRAY);
  const auto& mid = *std::get<std::shared_ptr<GgufArray>>(outer.items[1].data);
  EXPECT_EQ(mid.elem_type, GgufType::ARRAY);
  EXPECT_EQ(std::get<std::shared_ptr<GgufArray>>(mid.items[0].data)->elem_type, GgufType::STRING);
  // Metadata stays in file order.
  EXPECT_EQ(f.metadata()[f.find("general.alignment") == nullptr ? 0 : 1].first, "t.u8");
  EXPECT_EQ(f.metadata().back().first, "t.nested");
}

struct RoundTripCase {
  uint32_t version;
  uint64_t alignment;
};

class GgufRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(GgufRoundTrip, EveryValueTypeAndTensorLayout) {
  const RoundTripCase c = GetParam();
  GgufWriter w({.version = c.version, .alignment = c.alignment});
  add_every_type(w);
  w.add_tensor({"a.f32", DType::F32, {3, 2}, fill_with(pattern(24, 1))});
  w.add_tensor({"b.q8_0", DType::Q8_0, {64, 3}, fill_with(pattern(34 * 2 * 3, 2))});
  w.add_tensor({"c.q4_k", DType::Q4_K, {256}, fill_with(pattern(144, 3))});
  w.add_tensor({"d.f16", DType::F16, {5, 1, 2, 3}, fill_with(pattern(60, 4))});
  auto bytes = w.write_buffer();
  ASSERT_TRUE(bytes) << bytes.error().message;
  testing::ExactBytes exact(*bytes);
  auto file = GgufFile::parse(exact.span(), "roundtrip.gguf");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->version(), c.version);
  EXPECT_EQ(file->alignment(), c.alignment);
  EXPECT_EQ(file->data_offset() % c.alignment, 0u);
  EXPECT_EQ(file->data_offset(), *w.data_offset());
  EXPECT_EQ(file->find("general.alignment") != nullptr, c.alignment != 32);
  expect_every_type(*file);
  ASSERT_EQ(file->tensors().size(), 4u);
  const GgufTensor* d = file->find_tensor("d.f16");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->type, DType::F16);
  EXPECT_EQ(d->n_dims, 4);
  EXPECT_EQ(d->num_elements(), 30);
  EXPECT_EQ(d->nbytes, 60u);
  for (const GgufTensor& t : file->tensors()) {
    EXPECT_EQ(t.offset % c.alignment, 0u) << t.name;
    EXPECT_EQ(t.data, exact.span().data() + file->data_offset() + t.offset);
  }
  const GgufTensor* b = file->find_tensor("b.q8_0");
  EXPECT_EQ(b->nbytes, 204u);
  EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + b->nbytes), pattern(204, 2));
  EXPECT_EQ(file->find_tensor("c.q4_k")->data[143], pattern(144, 3)[143]);
  EXPECT_EQ(file->find_tensor("missing"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, GgufRoundTrip,
                         ::testing::Values(RoundTripCase{3, 32}, RoundTripCase{2, 32}, RoundTripCase{3, 1},
                                           RoundTripCase{3, 64}, RoundTripCase{2, 4096}),
                         [](const auto& info) {
                           return fmt::format("v{}_align{}", info.param.version, info.param.alignment);
                         });

TEST(GgufLookup, WrongTypesNameKeyAndTypes) {
  GgufWriter w;
  add_every_type(w);
  auto bytes = w.write_buffer();
  ASSERT_TRUE(bytes);
  auto f = GgufFile::parse(*bytes, "lookup.gguf");
  ASSERT_TRUE(f) << f.error().message;
  auto u = f->get_uint("t.str");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().message, "lookup.gguf: metadata key 't.str' has type STRING, expected an integer");
  auto negative = f->get_uint("t.i8");
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("-128"), std::string::npos);
  EXPECT_FALSE(f->get_float("t.u32"));
  EXPECT_FALSE(f->get_bool("t.u8"));
  EXPECT_FALSE(f->get_string("t.strs"));
  auto strs = f->get_string_array("t.f32s");
  ASSERT_FALSE(strs);
  EXPECT_NE(strs.error().message.find("ARRAY of FLOAT32"), std::string::npos);
  EXPECT_FALSE(f->get_float_array("t.strs"));
  EXPECT_FALSE(f->get_int_array("t.f32s"));
  EXPECT_FALSE(f->get_int_array("t.str"));
  // Missing keys are not errors.
  EXPECT_FALSE(f->get_uint("nope").value().has_value());
  EXPECT_FALSE(f->get_float("nope").value().has_value());
  EXPECT_FALSE(f->get_string("nope").value().has_value());
  EXPECT_FALSE(f->get_bool("nope").value().has_value());
  EXPECT_TRUE(f->get_string_array("nope").value().empty());
  EXPECT_TRUE(f->get_float_array("nope").value().empty());
  EXPECT_TRUE(f->get_int_array("nope").value().empty());
}

TEST(GgufLookup, UnsignedArrayTooLargeForInt64) {
  GgufWriter w;
  w.add("big", gguf_array(GgufType::UINT64, {gguf_uint(GgufType::UINT64, 1ull << 63)}));
  auto bytes = w.write_buffer();
  ASSERT_TRUE(bytes);
  auto f = GgufFile::parse(*bytes, "big.gguf");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->get_int_array("big"));
}

TEST(GgufValueToString, SummarizesLongArraysAndEscapes) {
  std::vector<GgufValue> items;
  for (int i = 0; i < 20; ++i) items.push_back(gguf_int(GgufType::INT32, i));
  EXPECT_EQ(gguf_value_to_string(gguf_array(GgufType::INT32, items), 3), "[0, 1, 2, ... (20 INT32 items)]");
  EXPECT_EQ(gguf_value_to_string(gguf_string("a\"b\n")), R"("a\"b\x0a")");
  EXPECT_EQ(gguf_value_to_string(gguf_f32(1e-5f)), "1e-05");
  EXPECT_EQ(gguf_type_name(GgufType::FLOAT64), "FLOAT64");
}

TEST(GgufRealFiles, Stories260K) {
  auto f = GgufFile::open(kShared + "/models/stories260K.gguf");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(*f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(*f->get_uint("llama.context_length").value(), 512u);
  EXPECT_EQ(*f->get_uint("llama.embedding_length").value(), 64u);
  EXPECT_EQ(*f->get_uint("llama.attention.head_count_kv").value(), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon").value()), 1e-5f);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value().size(), 512u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value()[1], "<s>");
  ASSERT_EQ(f->tensors().size(), 48u);
  const GgufTensor* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->nbytes, 64u * 512 * 4);
  EXPECT_EQ(f->find_tensor("blk.0.attn_k.weight")->ne[1], 32);
  uint64_t params = 0;
  for (const GgufTensor& t : f->tensors()) {
    EXPECT_LE(t.data + t.nbytes, emb->data - f->data_offset() + f->file_size()) << t.name;
    params += t.num_elements();
  }
  // token_embd + output (64 x 512 each) + output_norm + 5 layers of (q, o: 64x64; k, v: 64x32; 3 ffn: 64x172; 2 norms)
  EXPECT_EQ(params, 2u * 64 * 512 + 64 + 5u * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172 + 2 * 64));
}

TEST(GgufRealFiles, SyntheticQuantizedModels) {
  struct Case {
    const char* file;
    std::map<DType, int> counts;
  };
  const Case cases[] = {
      {"synth-tiny-f16.gguf", {{DType::F16, 16}, {DType::F32, 5}}},
      {"synth-tiny-bf16.gguf", {{DType::BF16, 16}, {DType::F32, 5}}},
      {"synth-tiny-q8_0.gguf", {{DType::Q8_0, 16}, {DType::F32, 5}}},
      {"synth-tiny-q4_0.gguf", {{DType::Q4_0, 15}, {DType::Q6_K, 1}, {DType::F32, 5}}},
      {"synth-tiny-q4_k_m.gguf", {{DType::Q4_K, 13}, {DType::Q6_K, 3}, {DType::F32, 5}}},
      {"synth-tiny-q6_k.gguf", {{DType::Q6_K, 16}, {DType::F32, 5}}},
  };
  for (const Case& c : cases) {
    auto f = GgufFile::open(kShared + "/models/synthetic/" + c.file);
    ASSERT_TRUE(f) << f.error().message;
    std::map<DType, int> counts;
    for (const GgufTensor& t : f->tensors()) counts[t.type]++;
    EXPECT_EQ(counts, c.counts) << c.file;
    EXPECT_EQ(*f->get_uint("llama.embedding_length").value(), 256u);
  }
}

TEST(GgufRealFiles, VocabularyOnlyFiles) {
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-coder", "mpt", "refact"}) {
    auto f = GgufFile::open(kShared + "/vocab/ggml-vocab-" + name + ".gguf");
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_LE(f->data_offset(), f->file_size());
    EXPECT_GT(f->get_string_array("tokenizer.ggml.tokens").value().size(), 30000u) << name;
  }
}

TEST(GgufRealFiles, OpenMissingFileNamesIt) {
  auto f = GgufFile::open("/nonexistent/x.gguf");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("/nonexistent/x.gguf"), std::string::npos);
}

TEST(GgufDescribe, Stories260K) {
  auto f = GgufFile::open(kShared + "/models/stories260K.gguf");
  ASSERT_TRUE(f) << f.error().message;
  std::string text = describe_gguf(*f);
  for (const char* expected : {"architecture  llama", "format        GGUF v3, alignment 32", "tensors       48: 48 F32",
                               "tokenizer     llama, 512 tokens, bos 1, eos 2, unknown 0\n",
                               "hyperparameters (llama.*)", "  context_length                    512",
                               "  attention.layer_norm_rms_epsilon  1e-05", "size          1.13 MiB (1185376 bytes)"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text;
  }
}

TEST(GgufDescribe, Formatting) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1185376), "1.13 MiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(260800), "261K");
  EXPECT_EQ(format_count(1100048384), "1.10B");
}

}  // namespace
}  // namespace hearth

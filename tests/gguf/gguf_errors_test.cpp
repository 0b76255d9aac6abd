// GgufFile on broken input: one hand-made file per error class. Each error must name the file, the byte
// offset of the bad field, and the problem.

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"

namespace hearth {
namespace {

using testing::ExactBytes;
using testing::GgufBytes;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

std::string parse_error(const GgufBytes& b) {
  ExactBytes exact(b.bytes());
  auto f = GgufFile::parse(exact.span(), "bad.gguf");
  return f ? std::string("<parsed>") : f.error().message;
}

void expect_error(const GgufBytes& b, size_t at, std::string_view problem) {
  std::string message = parse_error(b);
  EXPECT_TRUE(message.starts_with(fmt::format("bad.gguf: at byte {}: ", at))) << message;
  EXPECT_NE(message.find(problem), std::string::npos) << "wanted '" << problem << "' in: " << message;
}

// A valid file: one UINT32 key and one F32 tensor of 8 elements.
GgufBytes valid_file() {
  GgufBytes b;
  b.header(1, 1).kv_u32("a.b", 1).tensor_info("w", {8}, kF32, 0).pad_to(32).zeros(32);
  return b;
}

TEST(GgufErrors, BaselineParses) {
  EXPECT_EQ(parse_error(valid_file()), "<parsed>");
}

TEST(GgufErrors, EmptyFile) {
  expect_error(GgufBytes(), 0, "file truncated: magic needs 4 bytes, 0 remain");
}

TEST(GgufErrors, WrongMagic) {
  GgufBytes b;
  b.u32(0x4c4d5347).u32(3).u64(0).u64(0);
  expect_error(b, 0, "not a GGUF file: magic is 47534d4c");
}

TEST(GgufErrors, Version1Rejected) {
  GgufBytes b;
  b.header(0, 0, 1);
  expect_error(b, 4, "GGUF version 1 is not supported");
}

TEST(GgufErrors, UnknownAndBigEndianVersions) {
  GgufBytes future;
  future.header(0, 0, 4);
  expect_error(future, 4, "unsupported GGUF version 4");
  GgufBytes big_endian;
  big_endian.header(0, 0, 0x03000000);
  expect_error(big_endian, 4, "big-endian");
}

TEST(GgufErrors, TruncatedHeader) {
  GgufBytes b;
  b.header(0, 0);
  std::vector<uint8_t> cut(b.bytes().begin(), b.bytes().begin() + 12);
  ExactBytes exact(cut);
  auto f = GgufFile::parse(exact.span(), "bad.gguf");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message,
            "bad.gguf: at byte 8: file truncated: tensor count needs 8 bytes, 4 remain (file is 12 bytes)");
}

TEST(GgufErrors, AbsurdCountsFailBeforeAllocating) {
  GgufBytes kv;
  kv.header(0, 1ull << 60).zeros(64);
  expect_error(kv, 16, "metadata count 1152921504606846976 cannot fit in the 64 bytes that remain");
  GgufBytes tensors;
  tensors.header(~0ull, 0).zeros(64);
  expect_error(tensors, 8, "tensor count 18446744073709551615 cannot fit");
}

TEST(GgufErrors, KeyLengthPastEnd) {
  GgufBytes b;
  b.header(0, 1).u64(1ull << 40).type(GgufType::UINT8).u8(0);
  expect_error(b, 24, "key length 1099511627776 runs past end of file (5 bytes remain)");
}

TEST(GgufErrors, StringValuePastEnd) {
  GgufBytes b;
  b.header(0, 1).str("k").type(GgufType::STRING).u64(100).str("short");
  expect_error(b, 37, "string length 100 runs past end of file");
}

TEST(GgufErrors, TruncatedValueNamesTheKey) {
  GgufBytes b;
  b.header(0, 2).kv_u32("first", 1).str("second.key").type(GgufType::UINT64).u32(7);
  std::string message = parse_error(b);
  EXPECT_NE(message.find("UINT64 value needs 8 bytes, 4 remain"), std::string::npos) << message;
  EXPECT_NE(message.find("(in metadata entry 1 'second.key')"), std::string::npos) << message;
}

TEST(GgufErrors, ArrayLengthPastEnd) {
  GgufBytes b;
  b.header(0, 1).str("k").type(GgufType::ARRAY).type(GgufType::UINT32);
  size_t at = b.size();
  b.u64(1ull << 62).zeros(16);
  expect_error(b, at, "array of 4611686018427387904 UINT32 items runs past end of file (16 bytes remain)");
}

TEST(GgufErrors, StringArrayLengthPastEnd) {
  GgufBytes b;
  b.header(0, 1).str("k").type(GgufType::ARRAY).type(GgufType::STRING);
  size_t at = b.size();
  b.u64(3).str("abcdefgh").str("b");
  expect_error(b, at + 8 + 16 + 9, "file truncated: string needs 8 bytes, 0 remain");
}

TEST(GgufErrors, UnknownValueType) {
  GgufBytes b;
  b.header(0, 1).str("k");
  size_t at = b.size();
  b.u32(13).u32(0);
  expect_error(b, at, "unknown metadata value type 13");
}

TEST(GgufErrors, UnknownArrayElementType) {
  GgufBytes b;
  b.header(0, 1).str("k").type(GgufType::ARRAY);
  size_t at = b.size();
  b.u32(99).u64(0);
  expect_error(b, at, "unknown array element type 99");
}

TEST(GgufErrors, NestingDepthLimit) {
  auto nested = [](int depth) {
    GgufBytes b;
    b.header(0, 1).str("deep").type(GgufType::ARRAY);
    for (int i = 1; i < depth; ++i) b.type(GgufType::ARRAY).u64(1);
    b.type(GgufType::UINT8).u64(0);
    return b;
  };
  EXPECT_EQ(parse_error(nested(8)), "<parsed>");
  GgufBytes too_deep = nested(9);
  expect_error(too_deep, 40 + 8 * 12, "arrays nested deeper than 8 levels");
}

TEST(GgufErrors, DuplicateKey) {
  GgufBytes b;
  b.header(0, 2).kv_u32("a.b", 1);
  size_t at = b.size();
  b.kv_u32("a.b", 2);
  expect_error(b, at, "duplicate metadata key 'a.b'");
}

TEST(GgufErrors, BoolOutOfRange) {
  GgufBytes b;
  b.header(0, 1).str("flag").type(GgufType::BOOL);
  size_t at = b.size();
  b.u8(2);
  expect_error(b, at, "BOOL value is 2, expected 0 or 1");
}

TEST(GgufErrors, AlignmentMustBeNonzeroPowerOfTwo) {
  for (uint32_t bad : {0u, 48u}) {
    GgufBytes b;
    b.header(0, 1).str("general.alignment").type(GgufType::UINT32);
    size_t at = b.size();
    b.u32(bad);
    expect_error(b, at, fmt::format("general.alignment {} is not a nonzero power of two", bad));
  }
  GgufBytes text;
  text.header(0, 1).str("general.alignment").type(GgufType::STRING);
  size_t at = text.size();
  text.str("32");
  expect_error(text, at, "general.alignment has type STRING, expected an integer");
}

TEST(GgufErrors, DuplicateTensorName) {
  GgufBytes b;
  b.header(2, 0).tensor_info("w", {8}, kF32, 0);
  size_t at = b.size();
  b.tensor_info("w", {8}, kF32, 32).pad_to(32).zeros(64);
  expect_error(b, at, "duplicate tensor name 'w'");
}

TEST(GgufErrors, DimensionCount) {
  for (uint32_t n_dims : {0u, 5u}) {
    GgufBytes b;
    b.header(1, 0).str("w");
    size_t at = b.size();
    b.u32(n_dims).zeros(64);
    expect_error(b, at, fmt::format("tensor has {} dimensions, expected 1 to 4", n_dims));
  }
}

TEST(GgufErrors, NonPositiveDimension) {
  GgufBytes zero;
  zero.header(1, 0).str("w").u32(2).u64(8);
  size_t at = zero.size();
  zero.u64(0).u32(kF32).u64(0);
  expect_error(zero, at, "tensor dimension 1 is 0, expected a positive size");
  GgufBytes negative;
  negative.header(1, 0).str("w").u32(1);
  at = negative.size();
  negative.u64(~0ull).u32(kF32).u64(0);
  expect_error(negative, at, "tensor dimension 0 is -1");
}

TEST(GgufErrors, ElementCountOverflow) {
  GgufBytes b;
  b.header(1, 0).str("w").u32(3).u64(1ull << 32).u64(1ull << 30);
  size_t at = b.size();
  b.u64(1ull << 10).u32(kF32).u64(0);
  expect_error(b, at, "tensor element count overflows 64 bits at dimension 2");
}

TEST(GgufErrors, ByteSizeOverflow) {
  GgufBytes b;
  b.header(1, 0).str("w").u32(2).u64(1ull << 32).u64(1ull << 30);
  size_t at = b.size();
  b.u32(kF32).u64(0);
  expect_error(b, at, "tensor byte size overflows 64 bits");
}

TEST(GgufErrors, UnknownTensorType) {
  for (uint32_t type : {4u, 31u, 99u}) {  // 4 and 5 were removed from GGML; 31-33 are unassigned
    GgufBytes b;
    b.header(1, 0).str("w").u32(1).u64(32);
    size_t at = b.size();
    b.u32(type).u64(0);
    expect_error(b, at, fmt::format("unknown tensor type {}", type));
  }
}

TEST(GgufErrors, RowNotWholeBlocks) {
  GgufBytes b;
  b.header(1, 0).str("w").u32(2).u64(33).u64(2);
  size_t at = b.size();
  b.u32(kQ8_0).u64(0);
  expect_error(b, at, "tensor row of 33 elements is not a multiple of the Q8_0 block size 32");
}

TEST(GgufErrors, TensorOffsetNotAligned) {
  GgufBytes b;
  b.header(1, 0).str("w").u32(1).u64(8).u32(kF32);
  size_t at = b.size();
  b.u64(4).pad_to(32).zeros(64);
  expect_error(b, at, "tensor data offset 4 is not a multiple of the alignment 32");
}

TEST(GgufErrors, TensorOffsetNotAlignedToCustomAlignment) {
  GgufBytes b;
  b.header(1, 1).kv_u32("general.alignment", 64).str("w").u32(1).u64(8).u32(kF32);
  size_t at = b.size();
  b.u64(32).pad_to(64).zeros(128);
  expect_error(b, at, "tensor data offset 32 is not a multiple of the alignment 64");
}

TEST(GgufErrors, TensorDataPastEnd) {
  GgufBytes b;
  b.header(2, 0).tensor_info("a", {8}, kF32, 0).str("b").u32(1).u64(16).u32(kF32);
  size_t at = b.size();
  b.u64(32).pad_to(32).zeros(32 + 60);
  expect_error(b, at, "tensor 'b' data [32, +64) runs past end of file");
}

TEST(GgufErrors, TensorOffsetHuge) {
  GgufBytes b;
  b.header(1, 0).str("w").u32(1).u64(8).u32(kF32);
  size_t at = b.size();
  b.u64(~0ull << 5).pad_to(32).zeros(32);
  expect_error(b, at, "runs past end of file");
}

TEST(GgufErrors, DataSectionPastEnd) {
  GgufBytes b;
  b.header(1, 0).tensor_info("w", {8}, kF32, 0);
  size_t at = b.size();
  expect_error(b, at, "data section would start at byte 64 (alignment 32), past end of file (57 bytes)");
}

TEST(GgufErrors, HugeAlignmentDoesNotOverflow) {
  GgufBytes b;
  b.header(1, 1).str("general.alignment").type(GgufType::UINT64).u64(1ull << 63).tensor_info("w", {8}, kF32, 0);
  std::string message = parse_error(b);
  EXPECT_NE(message.find("past end of file"), std::string::npos) << message;
}

TEST(GgufErrors, TensorsWithoutDataSectionPadding) {
  // A vocabulary-only file may end right after its metadata; it has no data section to align.
  GgufBytes b;
  b.header(0, 1).kv_u32("k", 1);
  ExactBytes exact(b.bytes());
  auto f = GgufFile::parse(exact.span(), "vocab.gguf");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->data_offset(), b.size());
}

}  // namespace
}  // namespace hearth

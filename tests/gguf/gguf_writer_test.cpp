// GgufWriter: files on disk read back, streamed tensor data, and every misuse reported as an error (never a
// broken file).

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

std::string tmp_path(const std::string& name) {
  fs::create_directories(HEARTH_TEST_TMP_DIR);
  return std::string(HEARTH_TEST_TMP_DIR) + "/gguf_writer_test_" + name;
}

GgufTensorFill zeros(size_t n) {
  return [n](GgufDataSink& sink) { return sink.write(std::vector<uint8_t>(n, 0)); };
}

std::string write_error(const GgufWriter& w) {
  auto bytes = w.write_buffer();
  return bytes ? std::string("<written>") : bytes.error().message;
}

TEST(GgufWriter, WritesFileInPiecesAndReadsBack) {
  const std::string path = tmp_path("pieces.gguf");
  GgufWriter w;
  w.add("general.architecture", gguf_string("llama"));
  // 1000 rows of 3 floats, streamed one row at a time; the row size is not a multiple of the alignment.
  w.add_tensor({"rows", DType::F32, {3, 1000}, [](GgufDataSink& sink) -> Result<void> {
                  for (int r = 0; r < 1000; ++r) {
                    float row[3] = {float(r), float(r) + 0.5f, -float(r)};
                    HEARTH_TRY(sink.write({reinterpret_cast<const uint8_t*>(row), sizeof(row)}));
                  }
                  return {};
                }});
  w.add_tensor({"after", DType::F32, {8}, zeros(32)});
  auto ok = w.write_file(path);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_FALSE(fs::exists(path + ".partial"));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->get_string("general.architecture").value(), "llama");
  const GgufTensor* rows = f->find_tensor("rows");
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->nbytes, 12000u);
  const float* data = reinterpret_cast<const float*>(rows->data);
  EXPECT_EQ(data[3 * 999 + 1], 999.5f);
  EXPECT_EQ(f->find_tensor("after")->offset, 12000u);  // 12000 is already a multiple of 32
  EXPECT_EQ(f->file_size(), f->data_offset() + 12032);
  fs::remove(path);
}

TEST(GgufWriter, PadsEachTensorToAlignment) {
  GgufWriter w({.alignment = 64});
  w.add_tensor({"a", DType::F16, {3}, zeros(6)});
  w.add_tensor({"b", DType::F16, {3}, zeros(6)});
  auto bytes = w.write_buffer();
  ASSERT_TRUE(bytes);
  auto f = GgufFile::parse(*bytes, "pad.gguf");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->find_tensor("b")->offset, 64u);
  EXPECT_EQ(bytes->size() % 64, 0u);
  EXPECT_EQ(*f->get_uint("general.alignment").value(), 64u);
}

TEST(GgufWriter, FillSizeMismatchIsAnErrorAndLeavesNoFile) {
  const std::string path = tmp_path("short.gguf");
  GgufWriter w;
  w.add_tensor({"short", DType::F32, {4}, zeros(12)});
  auto result = w.write_file(path);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("tensor 'short': fill wrote 12 bytes, the tensor has 16"), std::string::npos)
      << result.error().message;
  EXPECT_NE(result.error().message.find(path), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));

  GgufWriter long_fill;
  long_fill.add_tensor({"long", DType::F32, {4}, zeros(20)});
  EXPECT_NE(write_error(long_fill).find("fill wrote 20 bytes, more than the tensor's 16"), std::string::npos);
}

TEST(GgufWriter, FillErrorsPropagate) {
  GgufWriter w;
  w.add_tensor({"x", DType::F32, {4}, [](GgufDataSink&) -> Result<void> { return make_error("source gone"); }});
  EXPECT_EQ(write_error(w), "source gone");
}

TEST(GgufWriter, RejectsInvalidInput) {
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> build;
    const char* error;
  };
  const Case cases[] = {
      {"duplicate key", [](GgufWriter& w) { w.add("k", gguf_u32(1)), w.add("k", gguf_u32(2)); },
       "duplicate metadata key 'k'"},
      {"alignment key", [](GgufWriter& w) { w.add("general.alignment", gguf_u32(64)); }, "through the options"},
      {"u8 overflow", [](GgufWriter& w) { w.add("k", gguf_uint(GgufType::UINT8, 256)); }, "256 does not fit UINT8"},
      {"i16 overflow", [](GgufWriter& w) { w.add("k", gguf_int(GgufType::INT16, -32769)); }, "does not fit INT16"},
      {"type mismatch",
       [](GgufWriter& w) {
         w.add("k", GgufValue{GgufType::STRING, uint64_t{1}});
       },
       "STRING type without a string"},
      {"mixed array",
       [](GgufWriter& w) {
         w.add("k", gguf_array(GgufType::UINT32, {gguf_u32(1), gguf_string("x")}));
       },
       "array item type differs"},
      {"null array",
       [](GgufWriter& w) {
         w.add("k", GgufValue{GgufType::ARRAY, std::shared_ptr<GgufArray>()});
       },
       "ARRAY type without an array"},
      {"duplicate tensor",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::F32, {1}, zeros(4)}), w.add_tensor({"t", DType::F32, {1}, zeros(4)});
       },
       "duplicate tensor name 't'"},
      {"no dims",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::F32, {}, zeros(4)});
       },
       "0 dimensions"},
      {"five dims",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::F32, {1, 1, 1, 1, 1}, zeros(4)});
       },
       "5 dimensions"},
      {"zero dim",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::F32, {4, 0}, zeros(0)});
       },
       "dimension 0 is not positive"},
      {"partial block",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::Q8_0, {48}, zeros(0)});
       },
       "row of 48 elements is not a multiple of the Q8_0 block size 32"},
      {"no fill",
       [](GgufWriter& w) {
         w.add_tensor({"t", DType::F32, {4}, nullptr});
       },
       "no fill function"},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    c.build(w);
    std::string error = write_error(w);
    EXPECT_NE(error.find(c.error), std::string::npos) << c.what << ": " << error;
  }
  GgufWriter bad_alignment({.alignment = 48});
  EXPECT_NE(write_error(bad_alignment).find("alignment 48"), std::string::npos);
  GgufWriter bad_version({.version = 1});
  EXPECT_NE(write_error(bad_version).find("version 1"), std::string::npos);
}

TEST(GgufWriter, UnwritablePathIsAnError) {
  GgufWriter w;
  auto result = w.write_file("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("/nonexistent-dir/x.gguf.partial: cannot create"), std::string::npos);
}

}  // namespace
}  // namespace hearth

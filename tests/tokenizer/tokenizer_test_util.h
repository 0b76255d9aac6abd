#pragma once
// Helpers shared by the tokenizer tests: loading the shared vocabularies and comparing token ids.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace hearth::test {

inline std::string shared_path(const std::string& relative) {
  return std::string(HEARTH_SHARED_DIR) + "/" + relative;
}

// Loads the tokenizer of a shared GGUF file; fails the test (fatally) when it cannot.
inline Tokenizer load_tokenizer(const std::string& relative) {
  auto file = GgufFile::open(shared_path(relative));
  if (!file) ADD_FAILURE() << file.error().message;
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) ADD_FAILURE() << tokenizer.error().message;
  return std::move(*tokenizer);
}

// Loads each shared tokenizer once per test binary: the 32k-piece vocabularies are slow to parse under ASan.
inline const Tokenizer& cached_tokenizer(const std::string& relative) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(relative);
  if (it == cache.end()) it = cache.emplace(relative, load_tokenizer(relative)).first;
  return it->second;
}

inline const Tokenizer& stories() {
  return cached_tokenizer("models/stories260K.gguf");
}

inline std::vector<int32_t> ids(const std::vector<TokenId>& tokens) {
  std::vector<int32_t> out;
  for (const TokenId t : tokens) out.push_back(t.value);
  return out;
}

inline std::vector<TokenId> tokens(const std::vector<int32_t>& ids) {
  std::vector<TokenId> out;
  for (const int32_t id : ids) out.emplace_back(id);
  return out;
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// One reference case of llama.cpp's tokenizer tests: a text and its ids without BOS.
struct VocabCase {
  std::string text;
  std::vector<int32_t> expected;
};

// Reads NAME.gguf.inp (texts separated by "\n__ggml_vocab_test__\n") and NAME.gguf.out (ids, one line per text).
inline std::vector<VocabCase> read_vocab_cases(const std::string& gguf_relative) {
  const std::string inp = read_text_file(shared_path(gguf_relative + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) next = inp.size();
    cases.push_back(VocabCase{inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream out(read_text_file(shared_path(gguf_relative + ".out")));
  std::string line;
  for (VocabCase& c : cases) {
    EXPECT_TRUE(std::getline(out, line)) << "fewer lines in .out than cases in .inp";
    std::istringstream fields(line);
    for (int32_t id; fields >> id;) c.expected.push_back(id);
  }
  return cases;
}

inline bool is_well_formed(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Scan scan = utf8_scan(s, pos);
    if (scan.status != Utf8Status::kValid) return false;
    pos += scan.length;
  }
  return true;
}

// Decodes through an IncrementalDecoder one token at a time, checking that every output is well-formed UTF-8.
inline std::string stream_decode(const Tokenizer& tok, const std::vector<TokenId>& tokens) {
  IncrementalDecoder decoder(tok);
  std::string streamed;
  for (const TokenId t : tokens) {
    const std::string out = decoder.push(t);
    EXPECT_TRUE(is_well_formed(out)) << testing::PrintToString(out);
    streamed += out;
  }
  return streamed + decoder.flush();
}

}  // namespace hearth::test

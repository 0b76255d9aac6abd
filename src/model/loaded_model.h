#pragma once
// LoadedModel: everything a GGUF model file gives at start-up (the mapped file, the model, its tokenizer), with
// one error path for the CLI, the server, the benchmarks and the tests.

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace hearth {

struct LoadedModel {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Maps `path` and binds model and tokenizer. The error names the file and what is wrong with it.
[[nodiscard]] Result<LoadedModel> load_model_file(const std::string& path);

}  // namespace hearth

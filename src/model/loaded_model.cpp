#include "model/loaded_model.h"

namespace hearth {

Result<LoadedModel> load_model_file(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  LoadedModel loaded;
  loaded.file = std::make_shared<const GgufFile>(std::move(*file));
  auto model = Model::load(loaded.file);
  if (!model) return model.error();
  loaded.model = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(*loaded.file);
  if (!tokenizer) return tokenizer.error();
  loaded.tokenizer = std::make_unique<Tokenizer>(std::move(*tokenizer));
  return loaded;
}

}  // namespace hearth

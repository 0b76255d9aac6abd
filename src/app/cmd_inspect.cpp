#include <cstdio>
#include <string>

#include "app/commands.h"
#include "gguf/describe.h"
#include "gguf/gguf_file.h"

namespace hearth::app {

Command add_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  app.add_option("file", *path, "GGUF file")->required();
  return [path] {
    auto file = GgufFile::open(*path);
    if (!file) {
      std::fprintf(stderr, "error: %s\n", file.error().message.c_str());
      return 1;
    }
    std::fputs(describe_gguf(*file).c_str(), stdout);
    return 0;
  };
}

}  // namespace hearth::app

#pragma once
// Model fingerprint: names a model in prefix-cache keys. SHA-256 over every metadata key and value and every
// tensor's name, type, shape and offset (not the weight bytes: hashing gigabytes at startup would cost seconds,
// and a file whose layout and metadata are equal but whose weights differ is not a case that occurs by accident).

#include <string>

#include "gguf/gguf_file.h"

namespace hearth {

// Hex SHA-256, stable across builds and machines.
std::string model_fingerprint(const GgufFile& file);

}  // namespace hearth

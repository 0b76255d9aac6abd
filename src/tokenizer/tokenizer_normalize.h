#pragma once
// Text normalizers that run on each plain-text fragment before pre-tokenization, as the family's original
// tokenizer does (Hugging Face tokenizers' "normalizer"). GGUF does not store the normalizer, so it follows from
// the pre-tokenizer name: Qwen 2/2.5/3 ("qwen2") normalize to NFC. llama.cpp does not normalize at all, so for
// text that is not already NFC Hearth follows Hugging Face, not llama.cpp.

#include <string>
#include <string_view>

namespace hearth {

// True when `text` is already in Unicode Normalization Form C (always for ASCII and for ill-formed UTF-8,
// which is left as it is: NFC is defined on characters, and the byte-level encoder keeps every byte).
bool is_nfc(std::string_view text);

// `out` = NFC(text) (ICU). Requires well-formed UTF-8 (is_nfc() is true for ill-formed text).
void to_nfc(std::string_view text, std::string& out);

}  // namespace hearth

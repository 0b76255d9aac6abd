# Tokenizer tests (src/model/tokenizer*.cpp, src/model/utf8.cpp). Included from tests/model/CMakeLists.txt.
hearth_add_test(tokenizer_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/tokenizer_decode_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bpe_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/tokenizer_reference_test.cpp
  LIBS hearth_model hearth_gguf
  LABELS sanitize)
hearth_add_test(chat_tokens_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_tokens_test.cpp
                LIBS hearth_model hearth_template hearth_gguf LABELS sanitize)

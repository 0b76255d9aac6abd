# Synthetic model generator tests (src/model/synth.cpp). Included from tests/model/CMakeLists.txt.
hearth_add_test(synth_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/synth_test.cpp
  LIBS hearth_synth hearth_gguf hearth_tensor
  LABELS sanitize)

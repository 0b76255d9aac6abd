hearth_add_test(ops_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/ops_test.cpp LIBS hearth_kernels LABELS sanitize)

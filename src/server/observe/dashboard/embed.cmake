# Writes a C++ source defining hearth::server::dashboard_html() with the bytes of INPUT, to OUTPUT.
# Run at build time (cmake -P), so an edit of the page rebuilds the binary and nothing is read at run time.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR num_bytes "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],0x[0-9a-f][0-9a-f],)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by embed.cmake; do not edit.\n#include \"server/observe/dashboard_page.h\"\n\nnamespace hearth::server {\nnamespace {\nconstexpr unsigned char kPage[] = {\n${bytes}0x00};\n}  // namespace\n\nstd::string_view dashboard_html() {\n  return {reinterpret_cast<const char*>(kPage), ${num_bytes}};\n}\n\n}  // namespace hearth::server\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)

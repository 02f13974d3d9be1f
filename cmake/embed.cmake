# SPDX-License-Identifier: Apache-2.0
# Writes a C file defining `const unsigned char <NAME>[]` and `<NAME>_size`
# from the bytes of INPUT, with a NUL appended (so PTX and source are valid
# C strings; _size counts that NUL for text, not for binaries unless TEXT).
# Usage: cmake -DINPUT=f -DOUTPUT=f.c -DNAME=sym [-DTEXT=1] -P embed.cmake
file(READ "${INPUT}" hex HEX)
if(TEXT)
  string(APPEND hex "00")
endif()
string(LENGTH "${hex}" hexlen)
math(EXPR size "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}"
  "/* Generated from ${INPUT} by cmake/embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "const unsigned char ${NAME}[] = {\n  ${bytes}0x00};\n"
  "const size_t ${NAME}_size = ${size};\n")

# Writes the file IN as a C string constant `ak_prelude` into OUT.
file(READ ${IN} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n#include <stddef.h>\nconst char ak_prelude[] = {${bytes} 0x00};\nconst size_t ak_prelude_len = sizeof (ak_prelude) - 1;\n")

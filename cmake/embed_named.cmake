# Writes the file IN as a C string constant NAME (and NAME_len) into OUT.
# Like embed.cmake, for a second embedded file (the CUDA kernel prelude).
file(READ ${IN} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n#include <stddef.h>\nconst char ${NAME}[] = {${bytes} 0x00};\nconst size_t ${NAME}_len = sizeof (${NAME}) - 1;\n")

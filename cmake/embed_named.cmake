# Writes the file IN (followed by IN2 and IN3, when given) as a C string constant
# NAME (and NAME_len) into OUT.  Like embed.cmake, for a second embedded
# file (the CUDA kernel prelude: kernels/ak_kernel_cuda.h, then the building
# blocks of kernels/ak_blocks_cuda.h and the Hopper ones of
# kernels/ak_hopper_cuda.h).
file(READ ${IN} content HEX)
if(DEFINED IN2 AND NOT IN2 STREQUAL "")
  file(READ ${IN2} content2 HEX)
  string(APPEND content "${content2}")
endif()
if(DEFINED IN3 AND NOT IN3 STREQUAL "")
  file(READ ${IN3} content3 HEX)
  string(APPEND content "${content3}")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUT} "/* generated from ${IN} ${IN2} ${IN3}; do not edit */\n#include <stddef.h>\nconst char ${NAME}[] = {${bytes} 0x00};\nconst size_t ${NAME}_len = sizeof (${NAME}) - 1;\n")

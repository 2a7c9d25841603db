/*  tests/unit/cuda_emu/emu_sys_cuda.h: emu_sys.h and CUDA's half-type
    headers, precompiled for a candidate's emulation (AK_EMU_CAND; emu.h
    includes them first too, then redefines __global__ and its kin). */
#include "emu_sys.h"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector_functions.h>

#!/bin/sh
# ops/bench/bf16_convert/run.sh: the catalog's softmax block_row over 4096x32000
# in float16, in bfloat16 with the library's conversion (__bfloat162float) and
# in bfloat16 as ak_to_acc reads it now (a 16-bit shift), side by side in one
# run on this machine's GPU, twice each, at two configurations.  Needs nvcc.
#   ops/bench/bf16_convert/run.sh [WORK_DIR]
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/ops/bench/bf16_convert
k=$root/kernels
work=${1:-$(mktemp -d)}
mkdir -p "$work"
nv=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
for cfg in "512 4" "1024 2"; do
    set -- $cfg
    for v in float16 bf16_library bf16_shift; do
        case $v in
        float16) d=-DAK_DTYPE_FLOAT16; extra= ;;
        bf16_library) d=-DAK_DTYPE_BFLOAT16; extra=$here/library.h ;;
        bf16_shift) d=-DAK_DTYPE_BFLOAT16; extra= ;;
        esac
        cat "$k/ak_kernel_cuda.h" "$k/ak_blocks_cuda.h" $extra "$k/softmax/cuda/block_row.cu" "$here/main.cu" \
            > "$work/$v.cu"
        "$nv" -O3 -arch=sm_90 -std=c++17 -DAK_CUDA_HALF $d -DTHREADS=$1 -DVEC=$2 -DVARIANT="\"$v\"" \
            -include algorithm -include cstring -o "$work/$v" "$work/$v.cu"
    done
    for v in float16 bf16_library bf16_shift float16 bf16_library bf16_shift; do "$work/$v"; done
done

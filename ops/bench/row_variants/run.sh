#!/bin/sh
# ops/bench/row_variants/run.sh: configurations of one catalog row kernel side
# by side in one run on this machine's GPU, each as a share of the copy
# bandwidth measured in the same process (same bytes, device to device), its
# output digest beside it.  Needs nvcc.  Each configuration runs REPEAT times
# (default 2), interleaved.  STEP=build only builds into WORK, STEP=run only
# runs what WORK holds (build where nvcc is, run on the GPU host).
#   ops/bench/row_variants/run.sh OP SOURCE DTYPE ROWS COLS NIN GRID BLOCK "DEFS" ["DEFS"...]
#   e.g. ops/bench/row_variants/run.sh softmax block_row float16 4096 32000 1 rows THREADS \
#            "THREADS=512 VEC=4 CACHE=32" "THREADS=512 VEC=4 CACHE=64"
# GRID and BLOCK are C expressions of rows (and cols) and the kernel's macros,
# up to three comma-separated dimensions each; DEFS are NAME=VALUE.
# DIMS="B H S D" gives the kernel those dims instead of ROWS COLS (whose
# product stays the element count), e.g. rotary_embedding:
#   DIMS="1 32 4096 128" ops/bench/row_variants/run.sh rotary_embedding pos_major float16 \
#       131072 128 1 "(4096 + SPB - 1) / SPB, 1, HSPLIT" "TX, SPB" "TX=16 SPB=2 HSPLIT=1 VECB=16 HU=4 HINT=2"
# y has ROWS x COLS elements, zeroed first: a kernel writing fewer (a loss a
# row: cross_entropy ... 1 "(rows + ROWS - 1) / ROWS" "32 * WPR, ROWS") leaves the rest 0,
# and a kernel that only reads shows 200% at the copy's bandwidth (the copy moves twice its bytes).
# EXTRA=FILE puts a header between the preludes and the kernel (a
# replacement for a prelude function: ops/bench/bf16_convert).
set -eu
[ $# -ge 9 ] || { sed -n 2,21p "$0"; exit 2; }
root=$(cd "$(dirname "$0")/../../.." && pwd)
op=$1 src=$2 dtype=$3 rows=$4 cols=$5 nin=$6 grid=$7 block=$8
shift 8
case $dtype in
float32) d=FLOAT32 ;; float16) d=FLOAT16 ;; bfloat16) d=BFLOAT16 ;;
*) echo "run.sh: dtype '$dtype' is not float32, float16 or bfloat16" >&2; exit 2 ;;
esac
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
nv=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
step=${STEP:-all}
i=0
for defs in "$@"; do
    i=$((i + 1))
    [ "$step" = run ] && continue
    flags=
    for x in $defs; do flags="$flags -D$x"; done
    # the launch as a header (nvcc splits -D values at commas)
    { echo "#define NIN $nin"
      echo "#define GRID s_grid (rows, cols)"
      echo "#define BLOCK $block"
      echo "#define VARIANT \"$dtype $defs${EXTRA:+ + $(basename "$EXTRA")}\""
      [ -n "${DIMS:-}" ] && echo "#define AK_DIMS $(echo "$DIMS" | tr ' ' ',')"
      echo "static dim3 s_grid (long rows, long cols) { (void) rows; (void) cols; return dim3 ($grid); }"
    } > "$work/v$i.h"
    cat "$root/kernels/ak_kernel_cuda.h" "$root/kernels/ak_blocks_cuda.h" "$root/kernels/ak_hopper_cuda.h" ${EXTRA:+"$EXTRA"} "$root/kernels/$op/cuda/$src.cu" \
        "$work/v$i.h" "$root/ops/bench/row_variants/main.cu" > "$work/v$i.cu"
    # shellcheck disable=SC2086
    "$nv" -O3 -arch=sm_90 -std=c++17 -DAK_CUDA_HALF -DAK_DTYPE_$d $flags -o "$work/v$i" "$work/v$i.cu" &
done
wait
for i in $(seq $#); do
    [ -x "$work/v$i" ] || { echo "run.sh: configuration $i did not build ($work/v$i.cu)" >&2; exit 1; }
done
[ "$step" = build ] && exit 0
for _ in $(seq "${REPEAT:-2}"); do
    j=0
    for defs in "$@"; do
        j=$((j + 1))
        "$work/v$j" "$rows" "$cols"
    done
done

#!/bin/sh
# ops/bench/bf16_convert/run.sh: the catalog's softmax block_row over 4096x32000
# in float16, in bfloat16 as ak_to_acc reads it (a 16-bit shift) and in
# bfloat16 with the library's conversion (__bfloat162float, library.h), on
# this machine's GPU with ops/bench/row_variants (each twice, against a
# same-size copy), at two configurations.  Needs nvcc.
#   ops/bench/bf16_convert/run.sh [WORK_DIR]
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=${1:-$(mktemp -d)}
rv=$root/ops/bench/row_variants/run.sh
run() {   # DTYPE NAME [EXTRA]
    EXTRA=${3:-} WORK=$work/$2 "$rv" softmax block_row "$1" 4096 32000 1 rows THREADS \
        "THREADS=512 VEC=4" "THREADS=1024 VEC=2"
}
run float16 float16
run bfloat16 bf16_shift
run bfloat16 bf16_library "$root/ops/bench/bf16_convert/library.h"

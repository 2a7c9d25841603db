# shellcheck shell=sh
# ops/bench/nightly_lib.sh: what the nightly scripts (nightly_gpu.sh,
# nightly_carry.sh) write once a batch has finished.  Sourced, not run:
#   nightly_results CTL BATCH OUT ROOT   (CTL: the akctl command line with
#                                         its --coordinator)
#   nightly_compare OUT ROOT
# nightly_results writes OUT/report.json, receipts.json, best_by_candidate.md,
# report/ (akctl report --out), report.txt and stats.json while the
# coordinator runs; nightly_compare writes compare.md and compare.json with
# ops/bench/torch_compare.py where PyTorch is installed.
#   nightly_need_bin SCRIPT DIR   exit 2 naming what is missing unless DIR
#                                 holds akcoord, akworker and akctl
#                                 (also loop_gpu.sh's check)

nightly_need_bin() {
    for p in akcoord akworker akctl; do
        [ -x "$2/$p" ] || { echo "$1: no program $2/$p: BIN_DIR must hold akcoord, akworker and akctl (ops/bundle.sh, or build/bin)" >&2; exit 2; }
    done
}

nightly_results() {
    $1 report "$2" --json >"$3/report.json"
    $1 receipts "$2" --json >"$3/receipts.json"
    python3 "$4/ops/bench/best_by_candidate.py" "$3/receipts.json" --out "$3/best_by_candidate.md" >/dev/null \
        || echo "nightly: best_by_candidate.md not written" >&2
    $1 report "$2" --out "$3/report" >/dev/null
    $1 report "$2" >"$3/report.txt"
    $1 stats --json >"$3/stats.json" 2>/dev/null || true
}

nightly_compare() {
    if python3 -c 'import torch' 2>/dev/null; then
        python3 "$2/ops/bench/torch_compare.py" --report "$1/report.json" \
            --receipts "$1/receipts.json" --specs "$2/kernels" \
            --out "$1/compare.md" --json-out "$1/compare.json"
    else
        echo "nightly: no PyTorch here: compare.md not written"
    fi
}

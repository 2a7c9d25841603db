#!/usr/bin/env bash
# ops/bench/coord_scale.sh: how far one coordinator scales (issue 5, Benchmark).
#
#   ops/bench/coord_scale.sh [--bin DIR] [--out DIR] [--duration S] [--warmup S]
#                            [--workers "10 100 1000"] [--restarts N] [--spec FILE]
#                            [--wait-idle S] [--only "RUN ..."] [--repeat N] [--keep]
#                            [--scrape off|on|both] [--commit async|sync|thread|both|all] [--curve]
#                            [--load-nice N|both:N] [--pin on|both] [--probes outside|in-window|both]
#
# Runs a REAL akcoord with durable commits (LMDB syncs on every commit, the
# default) against akload (build/bin/akload: simulated workers, no kernel
# runs) on this host, over tcp://127.0.0.1, and measures in one go:
#   1. task round trips per second (ASSIGN -> acknowledged receipt), the
#      dispatch->ack latency (ASSIGN received -> ACK received, p50/p99) and
#      the credit->assign latency (a worker frees a slot by sending its
#      RECEIPT, or registers -> the ASSIGN that fills it, p50/p99) with
#      10, 100 and 1000 simulated workers, default group commit;
#   2. the same at 1000 workers with one commit per receipt (--commit-max 1),
#      and at 1000 workers paced by 100 ms and 250 ms tasks with no prefetch
#      (offering at most 10,000 and 4,000 round trips/s);
#   3. coordinator memory (VmRSS) per connected worker and per 100k stored tasks;
#   4. restart time with 100k tasks in the store (and with 200k after the
#      1000-worker run): exec of akcoord until its client endpoint answers
#      `stats`.
# Tasks come from a generated manifest: the softmax spec of kernels/ (--spec:
# another one, e.g. that of an older tree whose akctl reads it) with two
# extra candidates whose parameter spaces give 50,000 + 49,999 configurations,
# 100,000 tasks with the preflight (the per-batch limit).  Each load run starts
# from a copy of a store holding that batch twice (200,000 tasks), so that
# even above 10,000 round trips/s no run empties the queue.  A run that
# gets through 100,000 round trips completes the first batch (decides its
# winners, which keeps the loop busy for a while); the table says how many
# batches completed and the longest credit->assign wait of each run.
#
# Prints a Markdown table and writes results.json, every akload stats file,
# the coordinator's loop statistics at the end of each load run
# (loop-NAME.json: the wake-up histogram and the slowest wake-ups with what
# they did, akcoord --slow-wakeup-ms; their counts in the run's row) and
# coordinator log under --out (default: a new directory under /tmp).  Needs
# bash, jq and the binaries of a build (default build/bin; RelWithDebInfo is
# what docs/benchmarks.md reports).  Nothing here is a test: it takes a few
# minutes and its numbers depend on the machine and on what else runs on it.
# The last column is the coordinator's own share of receipt->ack: the
# bucket bound (akcoord's receipt_ack_ms histogram, ms buckets 5, 10, 20,
# 50, ...) under which 99% of its ACKs went out after their receipts were
# staged, over the coordinator's life (the wait in the socket before the
# loop read a receipt is not in it).
# Each load run records the CPU the rest of the machine used meanwhile
# ("foreign", in CPUs: all busy time minus that of this script's children
# and minus steal) and the CPU time the hypervisor took from this virtual
# machine during the measured window ("steal", in CPUs, /proc/stat);
# --wait-idle S waits up to S seconds before each run for a second in which
# the machine is at least 85% idle.  --only "paced4k-1000 ..." does only
# those load runs (names as in the table); --repeat N does each load run N
# times (NAME, NAME#2, ...) and summarizes the repeated runs' latencies.
# --scrape on runs akcoord with --metrics on a free loopback port and
# scrapes GET /metrics once a second during each load run (NAME+scrape);
# --scrape both does each load run without and then with the scraper, so
# that the two alternate (issue 21: scraping must not slow the loop).
# --commit sync runs akcoord with --commit-sync (the group commit's fsyncs
# on the loop's thread: NAME+sync); --commit both does each load run with
# the writer thread (the default, NAME) and with --commit-sync, alternating
# which goes first (issue 24); --commit thread runs akcoord with
# --commit-thread-ms 0 (every commit on the writer thread: NAME+thread; the
# default since session 29, so against a build of then or later NAME and
# NAME+thread run the same way), and --commit all runs the three,
# alternating their order.  None of them can be combined with --scrape.
# --load-nice N runs akload under nice -n N (NAME+niceN; N > 0: it yields
# the box's CPUs to the coordinator, N < 0, as root: the coordinator yields
# them to it; issue 24: what share of the tail is the two sharing two CPUs,
# given that akload takes the latencies' timestamps); --load-nice both:N
# does each load run plainly and with it, alternating which goes first.
# Not with --commit or --scrape comparisons.
# --pin on runs each load run's akcoord on CPU 0 and akload on the other
# CPUs (taskset; NAME+pin; at least 2 CPUs): issue 24, the coordinator
# and the load generator no longer wait for each other's CPU (on a real
# fleet the workers run on other hosts); --pin both does each load run
# pinned and plainly, alternating which goes first.  Not with --commit,
# --scrape or --load-nice comparisons.
# --curve runs every akcoord with CURVE on both endpoints (--cert/--keys;
# akload and akctl with certificates: ops/bench/curve_keys.sh) instead of
# --plain.
# The window: akload samples latencies for duration - warmup seconds from
# --warmup seconds after its last simulated worker registered (akload
# --warmup-from registered), and keeps the load on 2 s after it; this
# script's two snapshots (commits, receipts, CPU ticks, the loop's
# statistics: one `akctl stats` each) are taken before the window and
# after it, in that tail.  --probes in-window measures as up to session
# 29 (issue 24): the warm-up from akload's start, and five akctl calls at
# the window's two ends, inside it; --probes both does each load run both
# ways (NAME+inwin), alternating which goes first.  Not with the other
# comparisons.  Every credit->assign sample is kept (samples-NAME.txt:
# when the credit was freed, us from the window's start, and its wait),
# and the row gives the worst one-second p99 of the window beside the p99.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
out=""
duration=8
warmup=2
workers_list="10 100 1000"
restarts=3
wait_idle=0
keep=0
spec="$root/kernels/softmax/spec.json"
only=""
repeat=1
scrape=off
commit=async
curve=0
load_nice=""                 # N or both:N (--load-nice)
nice_now=0                   # the nice level of the akload being started
pin=""                       # on or both (--pin)
pin_now=0                    # 1: the load run being started is pinned
probes=outside               # --probes
probes_now=outside           # where the load run being started takes its snapshots

usage () {
    awk 'NR > 1 { if (!/^#/) exit; print }' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --workers) workers_list=$2; shift 2 ;;
        --restarts) restarts=$2; shift 2 ;;
        --wait-idle) wait_idle=$2; shift 2 ;;
        --spec) spec=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --only) only=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --scrape) scrape=$2; shift 2 ;;
        --commit) commit=$2; shift 2 ;;
        --curve) curve=1; shift ;;
        --load-nice) load_nice=$2; shift 2 ;;
        --pin) pin=$2; shift 2 ;;
        --probes) probes=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "coord_scale: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
for tool in jq; do
    command -v "$tool" >/dev/null || { echo "coord_scale: needs $tool" >&2; exit 2; }
done
for b in akcoord akctl akload; do
    [ -x "$bin/$b" ] || { echo "coord_scale: no $bin/$b (build first, or --bin DIR)" >&2; exit 2; }
done
[ "$warmup" -lt "$duration" ] || { echo "coord_scale: --warmup must be below --duration" >&2; exit 2; }
case "$repeat" in ''|*[!0-9]*|0) echo "coord_scale: --repeat must be a positive number" >&2; exit 2 ;; esac
case "$scrape" in off|on|both) ;; *) echo "coord_scale: --scrape must be off, on or both" >&2; exit 2 ;; esac
case "$commit" in async|sync|thread|both|all) ;; *) echo "coord_scale: --commit must be async, sync, thread, both or all" >&2; exit 2 ;; esac
if [ -n "$load_nice" ]; then
    [[ "$load_nice" =~ ^(both:)?-?([1-9]|1[0-9])$ ]] \
        || { echo "coord_scale: --load-nice must be N or both:N, N from -19 to 19 but 0" >&2; exit 2; }
    if [ "$commit" != async ] || [ "$scrape" != off ]; then
        echo "coord_scale: --load-nice with --commit $commit or --scrape $scrape: one comparison at a time" >&2; exit 2
    fi
fi
if [ -n "$pin" ]; then
    case "$pin" in on|both) ;; *) echo "coord_scale: --pin must be on or both" >&2; exit 2 ;; esac
    [ "$(nproc)" -ge 2 ] || { echo "coord_scale: --pin needs at least 2 CPUs ($(nproc) here)" >&2; exit 2; }
    command -v taskset >/dev/null || { echo "coord_scale: --pin needs taskset (util-linux)" >&2; exit 2; }
    if [ "$commit" != async ] || [ "$scrape" != off ] || [ -n "$load_nice" ]; then
        echo "coord_scale: --pin with --commit $commit, --scrape $scrape or --load-nice: one comparison at a time" >&2
        exit 2
    fi
fi
case "$probes" in outside|in-window|both) ;; *) echo "coord_scale: --probes must be outside, in-window or both" >&2; exit 2 ;; esac
if [ "$probes" != outside ] && { [ "$commit" != async ] || [ "$scrape" != off ] || [ -n "$load_nice" ] || [ -n "$pin" ]; }; then
    echo "coord_scale: --probes $probes with --commit, --scrape, --load-nice or --pin: one comparison at a time" >&2; exit 2
fi
probes_now=$probes
[ "$probes" = both ] && probes_now=outside
if [ "$commit" != async ] && [ "$scrape" != off ]; then
    echo "coord_scale: --commit $commit and --scrape $scrape: one comparison at a time" >&2; exit 2
fi
runs_known="$(for n in $workers_list; do printf 'group-%s ' "$n"; done)single-1000 paced-1000 paced4k-1000"
for r in $only; do
    [[ " $runs_known " == *" $r "* ]] || { echo "coord_scale: --only: no load run '$r' (one of: $runs_known)" >&2; exit 2; }
done
if [ -z "$out" ]; then
    out=$(mktemp -d /tmp/coord_scale.XXXXXX)
fi
mkdir -p "$out"
work=$(mktemp -d /tmp/coord_scale_work.XXXXXX)

# Ports: a random free pair (a bound port answers a bash /dev/tcp connect).
port_free () { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
while :; do
    wport=$(( 20000 + RANDOM % 12000 )); cport=$(( wport + 1 ))   # below the ephemeral range
    port_free "$wport" && port_free "$cport" && break
done
wep="tcp://127.0.0.1:$wport"
cep="tcp://127.0.0.1:$cport"
mport=$(( cport + 1 ))
while ! port_free "$mport"; do mport=$(( mport + 1 )); done

coord_pid=""
load_pid=""
scrape_pid=""
cleanup () {
    for p in $scrape_pid $load_pid $coord_pid; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in $scrape_pid $load_pid $coord_pid; do
        wait "$p" 2>/dev/null || true
    done
    [ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# --plain, or CURVE with the keys of ops/bench/curve_keys.sh (--curve)
coord_auth=(--plain)
load_auth=()
ctl_env=(AK_CERT= AK_SERVER_KEY=)
if [ "$curve" = 1 ]; then
    . "$root/ops/bench/curve_keys.sh"
    curve_keys "$bin" "$work"
    coord_auth=(--cert "$server_secret" --keys "$keys")
    load_auth=(--cert "$load_cert" --server-key "$server_pub")
    ctl_env=(AK_CERT="$ctl_cert" AK_SERVER_KEY="$server_pub")
fi
ctl () { env "${ctl_env[@]}" "$bin/akctl" --coordinator "$cep" "$@"; }
stat_of () { ctl --json stats | jq -r ".$1"; }
rss_kb () { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
anon_kb () { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }
# CPU clock ticks (user + system, every thread) a process used so far
proc_ticks () { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo -1; }
loadavg () { cut -d' ' -f1 /proc/loadavg; }
# busy (less steal) and total jiffies of the machine; CPU seconds of this
# shell's waited-for children
cpu_jiffies () { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6 - $9, t }' /proc/stat; }
# steal and total jiffies: time the hypervisor ran something else on this
# machine's virtual CPUs
steal_jiffies () { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $9, t }' /proc/stat; }
# the CPU ticks of akcoord and akload and the machine's steal and total
# jiffies, one line: what a load run's window is measured between
run_ticks () { echo "$(proc_ticks "$coord_pid") $(proc_ticks "$load_pid") $(steal_jiffies)"; }
# (`times` in this shell, not in a $(...) subshell, which has no children yet)
children_s () { tail -1 "$1" | awk '{ split ($1, a, "m"); split ($2, b, "m"); print a[1] * 60 + a[2] + b[1] * 60 + b[2] }'; }
# wait_idle: up to $wait_idle s for a second with the machine >= 85% idle
wait_for_idle () {
    local deadline=$(( SECONDS + wait_idle )) b0 t0 b1 t1
    while [ "$wait_idle" -gt 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
        read -r b0 t0 < <(cpu_jiffies); sleep 1; read -r b1 t1 < <(cpu_jiffies)
        [ $(( (b1 - b0) * 100 )) -le $(( (t1 - t0) * 15 )) ] && return 0
    done
    return 0
}
now_ns () { date +%s%N; }

# start_coord STORE LOG [akcoord options...]: starts akcoord, returns when
# its client endpoint answers.
start_coord () {
    local store=$1 log=$2; shift 2
    local cpus=()
    [ "$pin_now" = 1 ] && cpus=(taskset -c 0)
    "${cpus[@]}" "$bin/akcoord" "${coord_auth[@]}" --store "$store" --workers "$wep" --clients "$cep" "$@" >"$log" 2>&1 &
    coord_pid=$!
    local i
    for i in $(seq 1 3000); do
        kill -0 "$coord_pid" 2>/dev/null || break
        if port_free "$cport"; then sleep 0.01; continue; fi
        ctl --timeout 10000 stats >/dev/null && return 0
    done
    echo "coord_scale: akcoord did not answer (log $log)" >&2
    exit 1
}

stop_coord () {
    kill -TERM "$coord_pid"
    wait "$coord_pid" || { echo "coord_scale: akcoord exited with $? (see $out)" >&2; exit 1; }
    coord_pid=""
}

# ------------------------------------------------------------- the manifest
seqc () { seq -s, "$1" "$2"; }
cat >"$work/manifest.json" <<EOF
{
  "schema_version": 1,
  "name": "coord-scale",
  "targets": ["host"],
  "policy": {"max_attempts": 3, "lease_ms": 60000, "confirm": false,
             "search": {"strategy": "exhaustive"}},
  "ops": [
    {
      "spec": "$spec",
      "workloads": ["tiny"],
      "candidates": [],
      "extra_candidates": [
        {"name": "scale_a", "backend": "host",
         "source": {"name": "scale.c", "text": "/* coord_scale: akload never compiles this */\n"},
         "params": {"P": [$(seqc 1 1000)], "Q": [$(seqc 1 50)]}},
        {"name": "scale_b", "backend": "host",
         "source": {"name": "scale.c", "text": "/* coord_scale: akload never compiles this */\n"},
         "params": {"P": [$(seqc 1 1000)], "Q": [$(seqc 1 50)]},
         "constraints": ["P*Q < 50000"]}
      ]
    }
  ]
}
EOF

echo "coord_scale: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, results in $out" >&2
results="$out/results.json"
echo '{}' >"$results"
put () { jq "$1" "$results" >"$results.tmp" && mv "$results.tmp" "$results"; }
put ".date = \"$(date -u +%FT%TZ)\" | .host = \"$(hostname)\" | .cpus = $(nproc)
     | .bin = \"$bin\" | .duration_s = $duration | .warmup_s = $warmup"

# ---------------------------------------------------- 100k tasks in a store
tmpl="$work/tmpl"
start_coord "$tmpl" "$out/coord-submit.log" --log-level warn
t0=$(now_ns)
tasks=$(ctl --timeout 120000 --json submit --allow-unserved "$work/manifest.json" | jq -r .tasks)
t1=$(now_ns)
stop_coord
store_mb=$(du -sm "$tmpl" | cut -f1)
echo "coord_scale: store with $tasks tasks ($store_mb MiB), submitted in $(( (t1 - t0) / 1000000 )) ms" >&2
put ".store = {tasks: $tasks, mib: $store_mb, submit_ms: $(( (t1 - t0) / 1000000 ))}"

# The load runs start from a store of two such batches: above 10,000 round
# trips/s a run of warm-up + duration seconds would use up one batch (100,000
# tasks, the batch limit) and idle the workers.
tmpl2="$work/tmpl2"
cp -r "$tmpl" "$tmpl2"
start_coord "$tmpl2" "$out/coord-submit2.log" --log-level warn
tasks2=$(( tasks + $(ctl --timeout 120000 --json submit --allow-unserved "$work/manifest.json" | jq -r .tasks) ))
stop_coord
echo "coord_scale: load runs start from a store of $tasks2 tasks (two batches)" >&2
put ".store.load_tasks = $tasks2"

# --------------------------------------------------------- memory per worker
# 1000 idle workers on an empty store: the registry, routes, ZeroMQ pipes.
start_coord "$work/empty" "$out/coord-idle.log"
sleep 1
rss_empty=$(rss_kb "$coord_pid")
anon_empty=$(anon_kb "$coord_pid")
env "${ctl_env[@]}" "$bin/akload" "${load_auth[@]}" --coordinator "$wep" --workers 1000 --duration-s 5 --log-level warn \
    --stats-json "$out/akload-idle.json" >"$out/akload-idle.out" 2>&1 &
load_pid=$!
sleep 4
alive=$(stat_of workers_alive)
rss_idle=$(rss_kb "$coord_pid")
anon_idle=$(anon_kb "$coord_pid")
wait "$load_pid"; load_pid=""
stop_coord
per_worker=$(( (rss_idle - rss_empty) * 1024 / (alive > 0 ? alive : 1) ))
echo "coord_scale: RSS $rss_empty KiB empty, $rss_idle KiB with $alive workers: $per_worker bytes/worker" >&2
put ".memory = {empty_kib: $rss_empty, empty_anon_kib: $anon_empty, workers: $alive,
                with_workers_kib: $rss_idle, with_workers_anon_kib: $anon_idle,
                bytes_per_worker: $per_worker}"

# ------------------------------------------------------------- load runs
# scraper OUT: GET /metrics on $mport once a second until killed; each
# answer's status line and size go to OUT, the last answer to OUT.prom
# (bash /dev/tcp: no curl needed)
scraper () {
    while :; do
        if exec 3<>"/dev/tcp/127.0.0.1/$mport"; then
            printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
            local body; body=$(cat <&3)
            exec 3<&-
            printf '%s %s\n' "$(printf '%s' "$body" | head -1 | tr -d '\r')" "${#body}" >>"$1"
            printf '%s\n' "$body" >"$1.prom"
        fi
        sleep 1
    done
}

# run_load NAME WORKERS "AKLOAD OPTIONS" [akcoord options...]
run_load () {
    local name=$1 n=$2 lopts=$3; shift 3
    local store="$work/store-$name"
    rm -rf "$store"
    cp -r "$tmpl2" "$store"
    # the copy's dirty pages written back now, not during the run, where
    # the writeback would slow the coordinator's fsyncs
    sync
    local la jb0 jt0 jb1 jt1 cs0 cs1 foreign
    wait_for_idle
    la=$(loadavg)
    times >"$work/times0"
    read -r jb0 jt0 < <(cpu_jiffies); cs0=$(children_s "$work/times0")
    start_coord "$store" "$out/coord-$name.log" "$@"
    if [[ "$name" == *+scrape* ]]; then
        scraper "$out/scrapes-$name.txt" &
        scrape_pid=$!
    fi
    # shellcheck disable=SC2086  # $lopts is a list of options
    local lcpus=()
    [ "$pin_now" = 1 ] && lcpus=(taskset -c "1-$(( $(nproc) - 1 ))")
    local c0 r0 c1 r1 rss hwm k0 k1 l0 l1 s0 st0 s1 st1 steal window=() dry=null
    # --probes outside (the default): akload's window starts --warmup
    # seconds after its last worker registered and the load goes on 2 s
    # after it; this script's two snapshots (one akctl stats each) are
    # taken before the window and in that tail, so that neither they nor
    # a slow cold start (1000 CURVE handshakes take 2-2.6 s on 2 vCPUs)
    # fall in it.  --probes in-window: as up to session 29, the warm-up
    # from akload's start and five akctl calls in the window.
    [ "$probes_now" = outside ] && window=(--warmup-from registered --cooldown-s 2 --ready-file "$work/ready-$name")
    rm -f "$work/ready-$name"
    env "${ctl_env[@]}" nice -n "$nice_now" "${lcpus[@]}" "$bin/akload" "${load_auth[@]}" --coordinator "$wep" --workers "$n" \
        --duration-s "$duration" --warmup-s "$warmup" "${window[@]}" --samples "$out/samples-$name.txt" \
        --log-level warn --stats-json "$out/akload-$name.json" $lopts >"$out/akload-$name.out" 2>&1 &
    load_pid=$!
    if [ "$probes_now" = outside ]; then
        local t_reg i
        for i in $(seq 1 $(( duration * 20 ))); do
            [ -e "$work/ready-$name" ] && break
            kill -0 "$load_pid" 2>/dev/null || break
            sleep 0.05
        done
        [ -e "$work/ready-$name" ] || { echo "coord_scale: $name: not every simulated worker registered within $duration s (see $out/akload-$name.out)" >&2; exit 1; }
        t_reg=$(now_ns)
        read -r k0 l0 s0 st0 < <(run_ticks)
        ctl --json stats >"$work/snap0.json"
        c0=$(jq -r .commits "$work/snap0.json"); r0=$(jq -r .receipts_accepted "$work/snap0.json")
        # the window closes $duration s after the registration: 0.3 s later
        local left_ms=$(( (t_reg + duration * 1000000000 + 300000000 - $(now_ns)) / 1000000 ))
        [ "$left_ms" -gt 0 ] && sleep "$(awk -v m="$left_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
        read -r k1 l1 s1 st1 < <(run_ticks)
        rss=$(rss_kb "$coord_pid")
        ctl --json stats >"$work/snap1.json"
        c1=$(jq -r .commits "$work/snap1.json"); r1=$(jq -r .receipts_accepted "$work/snap1.json")
        # nothing queued 0.3 s after the window: the workers may have run
        # out of work inside it, and its rate understates the coordinator
        dry=$(jq -r '.tasks_queued == 0' "$work/snap1.json")
        [ "$dry" = true ] && echo "coord_scale: $name: WARNING: no task was queued at the window's end: the queue may have run dry inside it (its rate is then too low)" >&2
        # the loop's wake-ups (histogram, the last slow ones with what
        # they did), asked while the load still runs: after akload stops,
        # its 1000 disconnects would fill the ring
        jq '.loop' "$work/snap1.json" >"$out/loop-$name.json" 2>/dev/null || echo null >"$out/loop-$name.json"
    else
        sleep "$warmup"
        read -r k0 l0 s0 st0 < <(run_ticks)
        c0=$(stat_of commits); r0=$(stat_of receipts_accepted)
        sleep $(( duration - warmup - 1 ))
        read -r k1 l1 s1 st1 < <(run_ticks)
        c1=$(stat_of commits); r1=$(stat_of receipts_accepted)
        rss=$(rss_kb "$coord_pid")
        ctl --json stats | jq '.loop' >"$out/loop-$name.json" 2>/dev/null || echo null >"$out/loop-$name.json"
    fi
    wait "$load_pid" || { echo "coord_scale: akload exited with $? (see $out/akload-$name.out)" >&2; exit 1; }
    load_pid=""
    if [ -n "$scrape_pid" ]; then
        kill -TERM "$scrape_pid" 2>/dev/null || true
        wait "$scrape_pid" 2>/dev/null || true
        scrape_pid=""
    fi
    stop_coord
    times >"$work/times1"
    read -r jb1 jt1 < <(cpu_jiffies); cs1=$(children_s "$work/times1")
    # CPUs used by everything else on the machine during the run
    foreign=$(awk -v b="$(( jb1 - jb0 ))" -v t="$(( jt1 - jt0 ))" -v c0="$cs0" -v c1="$cs1" -v n="$(nproc)" \
        'BEGIN { hz = 100; ours = (c1 - c0) * hz; f = (b - ours) / t * n; if (f < 0) f = 0; printf "%.2f", f }')
    steal=$(awk -v s="$(( s1 - s0 ))" -v t="$(( st1 - st0 ))" -v n="$(nproc)" \
        'BEGIN { printf "%.2f", (t > 0 ? s / t * n : 0) }')
    local per_commit coord_us load_us settled worst_s
    # the worst one-second p99 of credit->assign in the window (nearest
    # rank, seconds with at least 100 samples): a window's p99 is decided
    # by its worst ~100 ms, this says whether one second made it
    worst_s=$(awk '{ print int ($1 / 1000000), $2 }' "$out/samples-$name.txt" | sort -k1,1n -k2,2n \
        | awk 'function flush () { if (n >= 100) { k = int (0.99 * n + 0.999999); v = a[k] / 1000; if (v > w) w = v } }
               $1 != s { flush(); s = $1; n = 0 } { a[++n] = $2 }
               END { flush(); if (w == "") print "null"; else printf "%.3f\n", w }')
    # batches that completed (decided their winners) during the run: the
    # loop is busy for a while when one does (its longest credit->assign)
    settled=$(grep -cE 'batch B[0-9]+ complete:' "$out/coord-$name.log" || true)
    per_commit=$(jq -n "if ($c1 - $c0) > 0 then (($r1 - $r0) / ($c1 - $c0) * 10 | round / 10) else 0 end")
    # CPU per accepted receipt, over the same window: what the coordinator
    # (all its threads) and akload spend per round trip, which foreign load
    # changes far less than the rate
    # (a stats answer can lag under load: a tick count read after it would
    # miss the window, so ticks are read first; -1: the process had exited)
    coord_us=$(jq -n "if ($r1 - $r0) > 0 and $k0 >= 0 and $k1 >= 0 then (($k1 - $k0) * 10000 / ($r1 - $r0) | round) else null end")
    load_us=$(jq -n "if ($r1 - $r0) > 0 and $l0 >= 0 and $l1 >= 0 then (($l1 - $l0) * 10000 / ($r1 - $r0) | round) else null end")
    jq --arg name "$name" --argjson n "$n" --arg opts "$*" --arg lopts "$lopts" --argjson la "$la" \
       --argjson foreign "$foreign" --argjson steal "$steal" --argjson cus "$coord_us" --argjson lus "$load_us" \
       --argjson rss "$rss" --argjson pc "$per_commit" --argjson settled "${settled:-0}" \
       --argjson worst "$worst_s" --arg probes "$probes_now" --argjson dry "$dry" \
       --slurpfile loop "$out/loop-$name.json" \
       '{name: $name, workers: $n, akcoord_options: $opts, akload_options: $lopts, loadavg_before: $la,
         foreign_cpus: $foreign, steal_cpus: $steal, akcoord_cpu_us_per_rt: $cus, akload_cpu_us_per_rt: $lus,
         round_trips_per_s: (.round_trips_per_s | round),
         p50_ms: .dispatch_to_ack_latency.p50_ms, p99_ms: .dispatch_to_ack_latency.p99_ms,
         commit_p50_ms: .receipt_to_ack_latency.p50_ms, commit_p99_ms: .receipt_to_ack_latency.p99_ms,
         credit_p50_ms: .credit_to_assign_latency.p50_ms, credit_p99_ms: .credit_to_assign_latency.p99_ms,
         credit_max_ms: .credit_to_assign_latency.max_ms, credit_p99_worst_s_ms: $worst,
         probes: $probes, window_start_s: .window_start_s, queue_dry_at_end: $dry, batches_completed: $settled,
         receipts_per_commit: $pc, rss_kib: $rss, acks: .counts.acks_received,
         duplicates_acked: .counts.duplicates_acked, reconnects: .counts.reconnects,
         assign_bytes: (if .counts.assign_bytes then (.counts.assign_bytes
                        / ((.counts.assigns // 0) + (.counts.stale_assigns // 0)) | round) else null end),
         loop_wakeups: ($loop[0].wakeups // null), loop_slow_wakeups: ($loop[0].slow_wakeups // null),
         coord_ack_p99_le_ms: ($loop[0].receipt_ack_ms as $h | if ($h.count // 0) > 0 then
             ([range(0; $h.counts | length) | select($h.counts[.] >= 0.99 * $h.count)] | first) as $i
             | $h.le[$i] else null end)}' \
       "$out/akload-$name.json" >"$out/run-$name.json"
    put ".runs += [$(cat "$out/run-$name.json")]"
    echo "coord_scale: $name: $(jq -c . "$out/run-$name.json")" >&2
}

# load NAME WORKERS "AKLOAD OPTIONS" [akcoord options...]: run_load, unless
# --only leaves NAME out, --repeat times
load () {
    local name=$1 k; shift
    if [ -n "$only" ] && ! [[ " $only " == *" $name "* ]]; then
        return 0
    fi
    local n=$1 lopts=$2; shift 2
    for k in $(seq 1 "$repeat"); do
        local tag="" plain=1 scraped=1
        [ "$k" = 1 ] || tag="#$k"
        if [ "$commit" != async ]; then
            # --commit both / all: the modes alternate which goes first,
            # as below
            local order=$commit
            [ "$commit" = both ] && { [ $(( k % 2 )) = 0 ] && order="sync async" || order="async sync"; }
            [ "$commit" = all ] && { [ $(( k % 2 )) = 0 ] && order="thread sync async" \
                                                          || order="async sync thread"; }
            for v in $order; do
                case $v in
                sync) run_load "$name+sync$tag" "$n" "$lopts" "$@" --commit-sync ;;
                thread) run_load "$name+thread$tag" "$n" "$lopts" "$@" --commit-thread-ms 0 ;;
                *) run_load "$name$tag" "$n" "$lopts" "$@" ;;
                esac
            done
            continue
        fi
        if [ -n "$pin" ] || [ -n "$load_nice" ]; then
            # --pin on|both, --load-nice N|both:N: the changed run alone,
            # or it and the plain one alternating which goes first, as below
            local nv=${load_nice#both:} suffix=+pin both=0 order=alt
            if [ -n "$pin" ]; then
                [ "$pin" = both ] && both=1
            else
                suffix=+nice$nv
                [ "$load_nice" != "$nv" ] && both=1
            fi
            [ "$both" = 1 ] && { [ $(( k % 2 )) = 0 ] && order="alt plain" || order="plain alt"; }
            for v in $order; do
                if [ "$v" = alt ]; then
                    if [ -n "$pin" ]; then pin_now=1; else nice_now=$nv; fi
                    run_load "$name$suffix$tag" "$n" "$lopts" "$@"
                    pin_now=0
                    nice_now=0
                else
                    run_load "$name$tag" "$n" "$lopts" "$@"
                fi
            done
            continue
        fi
        if [ "$probes" = both ]; then
            local v
            for v in $([ $(( k % 2 )) = 0 ] && echo "in-window outside" || echo "outside in-window"); do
                probes_now=$v
                if [ "$v" = in-window ]; then run_load "$name+inwin$tag" "$n" "$lopts" "$@"
                else run_load "$name$tag" "$n" "$lopts" "$@"; fi
            done
            probes_now=outside
            continue
        fi
        [ "$scrape" = on ] && plain=0
        [ "$scrape" = off ] && scraped=0
        # --scrape both: the two alternate which goes first, so that a
        # drift of the machine's load over the runs does not favour one
        if [ "$scraped" = 1 ] && [ $(( k % 2 )) = 0 ]; then
            run_load "$name+scrape$tag" "$n" "$lopts" "$@" --metrics "127.0.0.1:$mport"
            scraped=0
        fi
        [ "$plain" = 0 ] || run_load "$name$tag" "$n" "$lopts" "$@"
        [ "$scraped" = 0 ] || run_load "$name+scrape$tag" "$n" "$lopts" "$@" --metrics "127.0.0.1:$mport"
    done
}
# saturated: every worker always has work (slot + prefetch), so the
# latencies are queueing (Little's law: 2N tasks in flight / rate)
for n in $workers_list; do
    load "group-$n" "$n" ""
done
load "single-1000" 1000 "" --commit-max 1
# paced: 1000 workers, 1 slot, no prefetch, each task "runs" 100 ms, which
# offers at most 10,000 round trips/s; dispatch->ack is then 100 ms plus
# what the coordinator adds (dispatch, intake, group commit)
load "paced-1000" 1000 "--prefetch 0 --task-ms 100"
# below saturation: 250 ms tasks offer at most 4,000 round trips/s, so the
# latencies are the coordinator's own (dispatch, intake, group commit)
load "paced4k-1000" 1000 "--prefetch 0 --task-ms 250"

# ------------------------------------------------------------- restarts
# restart_time STORE NAME: ms from exec to a `stats` answer, RSS then.
# The endpoint is bound once the index is rebuilt; a bash /dev/tcp probe
# sees that within a millisecond or so, then one `stats` is timed with it.
restart_time () {
    local store=$1 name=$2 i t0 t1 ms rss anon
    for i in $(seq 1 "$restarts"); do
        wait_for_idle
        t0=$(now_ns)
        "$bin/akcoord" "${coord_auth[@]}" --store "$store" --workers "$wep" --clients "$cep" >"$out/coord-restart-$name.log" 2>&1 &
        coord_pid=$!
        while port_free "$cport"; do
            kill -0 "$coord_pid" 2>/dev/null || { echo "coord_scale: akcoord died on $store" >&2; exit 1; }
        done
        ctl --timeout 30000 stats >/dev/null
        t1=$(now_ns)
        ms=$(( (t1 - t0) / 1000000 ))
        rss=$(rss_kb "$coord_pid")
        anon=$(anon_kb "$coord_pid")
        stop_coord
        put ".restarts += [{store: \"$name\", ms: $ms, rss_kib: $rss, anon_kib: $anon}]"
        echo "coord_scale: restart on $name: $ms ms, RSS $rss KiB (anonymous $anon KiB)" >&2
    done
}
restart_time "$tmpl" "100k-queued"
last="group-${workers_list##* }"
if [ -d "$work/store-$last" ]; then      # not when --only left it out
    restart_time "$work/store-$last" "load-after-$last"
fi

# --------------------------------------------------------------- report
med () { jq "[.restarts[] | select(.store == \"$1\") | .$2] | sort | .[length/2|floor]" "$results"; }
rss_100k=$(med 100k-queued rss_kib)
anon_100k=$(med 100k-queued anon_kib)
put ".memory.kib_per_100k_tasks = (($rss_100k - .memory.empty_kib) * 100000 / .store.tasks | round)
     | .memory.anon_kib_per_100k_tasks = (($anon_100k - .memory.empty_anon_kib) * 100000 / .store.tasks | round)"

{
    echo "| run | workers | akcoord | akload | round trips/s | dispatch->ack p50 / p99 (ms) | credit->assign p50 / p99 / max (ms) | worst second's credit->assign p99 (ms) | batches completed | receipt->ack p50 / p99 (ms) | receipts/commit | akcoord CPU us/rt | akload CPU us/rt | ASSIGN bytes | RSS (MiB) | foreign CPUs | steal CPUs | staged->ACK p99 <= (ms) |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    jq -r '.runs[] | "| \(.name) | \(.workers) | \(if .akcoord_options == "" then "defaults" else .akcoord_options end) | \(if .akload_options == "" then "defaults" else .akload_options end) | \(.round_trips_per_s) | \(.p50_ms) / \(.p99_ms) | \(.credit_p50_ms) / \(.credit_p99_ms) / \(.credit_max_ms) | \(.credit_p99_worst_s_ms) | \(.batches_completed) | \(.commit_p50_ms) / \(.commit_p99_ms) | \(.receipts_per_commit) | \(.akcoord_cpu_us_per_rt) | \(.akload_cpu_us_per_rt) | \(.assign_bytes) | \(.rss_kib / 1024 | round) | \(.foreign_cpus) | \(.steal_cpus) | \(.coord_ack_p99_le_ms) |"' "$results"
    echo
    jq -r '"memory: \(.memory.bytes_per_worker) bytes per connected worker (\(.memory.workers) idle workers); \(.memory.kib_per_100k_tasks) KiB RSS per 100k stored tasks, \(.memory.anon_kib_per_100k_tasks) KiB of it anonymous (empty store \(.memory.empty_kib) KiB)"' "$results"
    after=$(med "load-after-$last" ms)
    echo "restart (median of $restarts): $(med 100k-queued ms) ms with $tasks tasks all queued, $([ "$after" = null ] && echo "not measured (--only left $last out)" || echo "$after ms with $tasks2 tasks after the $last run")"
    if [ "$repeat" -gt 1 ]; then
        # each repeated run: its p99s in order, and their median
        jq -r '.runs | group_by(.name | sub("#[0-9]+$"; "")) | .[]
               | "\(.[0].name): \(length) runs, round trips/s \([.[].round_trips_per_s] | map(tostring) | join(", ")) (median \([.[].round_trips_per_s] | sort | .[length/2|floor])), credit->assign p99 \([.[].credit_p99_ms] | map(tostring) | join(", ")) ms (median \([.[].credit_p99_ms] | sort | .[length/2|floor])); dispatch->ack p99 median \([.[].p99_ms] | sort | .[length/2|floor]); steal CPUs \([.[].steal_cpus] | map(tostring) | join(", "))"' "$results"
    fi
} | tee "$out/summary.md"

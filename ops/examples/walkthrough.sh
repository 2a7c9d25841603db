#!/bin/sh
# ops/examples/walkthrough.sh: docs/operations.md's "Setting up an authenticated
# fleet", step by step, as commands that run.
#
#   ops/examples/walkthrough.sh ROOT [BINDIR]   run it under ROOT (an empty
#                                               directory): ROOT/etc/akfleet,
#                                               ROOT/var/lib/akfleet, ...
#   ops/examples/walkthrough.sh --check-docs    check that docs/operations.md
#                                               and README.md show these commands
#
# The commands between the ">>> walkthrough" and "<<< walkthrough" lines are
# the documentation's, with $R (ROOT; empty on a real machine) in front of
# every absolute path and the coordinator's address in variables (one host,
# loopback, free ports here; coord.example.net, 0.0.0.0, 5555 and 5556 in the
# docs).  `--check-docs` compares them with the fenced block that follows
# "<!-- walkthrough -->" in docs/operations.md (same commands, both ways)
# and in README.md (a subset), so the docs cannot drift from what runs;
# tests/integration/test_walkthrough.c runs both modes.
#
# BINDIR defaults to build/bin; WPORT and CPORT (the coordinator's ports)
# may come from the environment.  Exit 0 when every step worked.
set -eu

here=$(cd "$(dirname "$0")/../.." && pwd)

# ------------------------------------------------------------- --check-docs
# The commands of a walkthrough block: comments and blank lines dropped,
# continuation lines joined, spaces collapsed, $R removed.
commands () {
    sed 's/[[:space:]]*#.*$//; s/\$R//g' | awk '
        { line = cont $0; cont = "" }
        /\\$/ { sub(/\\$/, "", line); cont = line " "; next }
        { gsub(/[[:space:]]+/, " ", line); sub(/^ /, "", line); sub(/ $/, "", line);
          if (line != "") print line }'
}

script_block () {
    sed -n '/^# >>> walkthrough$/,/^# <<< walkthrough$/p' "$here/ops/examples/walkthrough.sh" \
        | grep -v '# not in the docs$' | commands
}

doc_block () {
    awk '/^<!-- walkthrough -->$/ { on = 1; next }
         on == 1 && /^```/ { on = 2; next }
         on == 2 && /^```/ { exit }
         on == 2 { print }' "$1" | commands
}

if [ "${1:-}" = "--check-docs" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    script_block > "$tmp/script"
    doc_block "$here/docs/operations.md" > "$tmp/ops"
    doc_block "$here/README.md" > "$tmp/readme"
    bad=0
    [ -s "$tmp/ops" ] || { echo "docs/operations.md: no <!-- walkthrough --> block" >&2; bad=1; }
    [ -s "$tmp/readme" ] || { echo "README.md: no <!-- walkthrough --> block" >&2; bad=1; }
    while IFS= read -r line; do
        grep -qxF -- "$line" "$tmp/ops" || { echo "docs/operations.md lacks: $line" >&2; bad=1; }
    done < "$tmp/script"
    while IFS= read -r line; do
        grep -qxF -- "$line" "$tmp/script" || { echo "docs/operations.md: not in the walkthrough: $line" >&2; bad=1; }
    done < "$tmp/ops"
    while IFS= read -r line; do
        grep -qxF -- "$line" "$tmp/script" || { echo "README.md: not in the walkthrough: $line" >&2; bad=1; }
    done < "$tmp/readme"
    [ $bad -eq 0 ] && echo "walkthrough: docs/operations.md and README.md show the commands that run"
    exit $bad
fi

# -------------------------------------------------------------------- run
[ $# -ge 1 ] && [ -d "$1" ] || { echo "usage: $0 ROOT [BINDIR] | --check-docs" >&2; exit 2; }
R=$(cd "$1" && pwd)
BIN=$(cd "${2:-$here/build/bin}" && pwd)
PATH="$BIN:$PATH"
HOME="$R/home/alice"            # the operator's ~
export PATH HOME
mkdir -p "$HOME"
cd "$here"                      # kernels/ and ops/examples/ as in the docs

COORD=127.0.0.1 BIND=127.0.0.1
WPORT=${WPORT:-$((20000 + $$ % 20000))} CPORT=${CPORT:-$((40001 + $$ % 20000))}
pids=""
cleanup () {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
step () { printf '\n== %s\n' "$*"; }

# >>> walkthrough
# 1. on the coordinator host: its own certificate
mkdir -p $R/etc/akfleet
akctl keys new akcoord --role server --dir $R/etc/akfleet

# 2. one key per worker host, per operator, per viewer
akctl keys new gpu-host-01 --role worker --dir $R/etc/akfleet/keys
akctl keys new alice --role operator --dir $R/etc/akfleet/keys
akctl keys new dashboard --role viewer --dir $R/etc/akfleet/keys
akctl keys list --dir $R/etc/akfleet/keys

# 3. each secret goes to its user, with the coordinator's public certificate
install -D -m 600 $R/etc/akfleet/keys/worker/gpu-host-01.key_secret $R/etc/akfleet/akworker.key_secret
install -D -m 644 $R/etc/akfleet/server/akcoord.key $R/etc/akfleet/akcoord.key
install -D -m 600 $R/etc/akfleet/keys/operator/alice.key_secret ~/.akfleet/alice.key_secret
install -D -m 644 $R/etc/akfleet/server/akcoord.key ~/.akfleet/akcoord.key
install -D -m 600 $R/etc/akfleet/keys/viewer/dashboard.key_secret ~/.akfleet/dashboard.key_secret
rm $R/etc/akfleet/keys/*/*.key_secret

# 4. the coordinator
mkdir -p $R/var/lib/akfleet
akcoord --store $R/var/lib/akfleet/store --cert $R/etc/akfleet/server/akcoord.key_secret \
        --keys $R/etc/akfleet/keys --workers tcp://$BIND:$WPORT --clients tcp://$BIND:$CPORT &
pids="$pids $!"                                             # not in the docs

# 5. a worker, and an operator
mkdir -p $R/var/cache/akfleet
akworker --coordinator tcp://$COORD:$WPORT --id gpu-host-01 \
         --cert $R/etc/akfleet/akworker.key_secret --server-key $R/etc/akfleet/akcoord.key \
         --cache $R/var/cache/akfleet &
pids="$pids $!"                                             # not in the docs
export AK_COORDINATOR=tcp://$COORD:$CPORT AK_CERT=~/.akfleet/alice.key_secret \
       AK_SERVER_KEY=~/.akfleet/akcoord.key
n=0; until akctl --json workers | grep -q '"state": *"alive"'; do n=$((n + 1)); [ $n -lt 120 ]; sleep 1; done # not in the docs
akctl workers
B=$(akctl submit --op ops/examples/scale_bias --workloads tiny)
akctl watch "$B"
akctl report "$B"
# <<< walkthrough

step "checks beyond the docs"
# the coordinator's directory holds public keys only
if ls "$R"/etc/akfleet/keys/*/*.key_secret >/dev/null 2>&1; then
    echo "walkthrough: secrets left in the key directory" >&2
    exit 1
fi
# the viewer may read and may not submit; a key the coordinator does not
# know gets no answer
AK_CERT=~/.akfleet/dashboard.key_secret akctl list >/dev/null
if AK_CERT=~/.akfleet/dashboard.key_secret akctl submit --op ops/examples/scale_bias --workloads tiny 2>/dev/null; then
    echo "walkthrough: a viewer key submitted a batch" >&2
    exit 1
fi
akctl keys new stranger --role operator --dir "$R/elsewhere" >/dev/null
if AK_CERT="$R/elsewhere/operator/stranger.key_secret" akctl --timeout 1000 workers >/dev/null 2>&1; then
    echo "walkthrough: an unknown key was answered" >&2
    exit 1
fi
akctl shutdown
echo "walkthrough: every step worked (ROOT $R)"

# ops/bench/curve_keys.sh: sourced by the benchmarks that run CURVE
# (curve_cost.sh, coord_scale.sh --curve).
#
# curve_keys BIN DIR: makes, under DIR, the coordinator's server key, one
# worker key for every simulated akload worker (its certificate allows 1024
# worker ids) and an operator key, and sets
#   keys           the --keys directory (worker/, operator/)
#   server_secret  akcoord's --cert
#   server_pub     what akload and akctl pass as --server-key / AK_SERVER_KEY
#   load_cert      akload's --cert
#   ctl_cert       akctl's AK_CERT
curve_keys () {
    local bin=$1 dir=$2
    keys="$dir/keys"
    "$bin/akctl" keys new akcoord --role server --dir "$dir/server" >/dev/null
    "$bin/akctl" keys new load --role worker --dir "$keys" >/dev/null
    # one key for all of akload's workers: its certificate must allow that many ids
    sed -i 's/^metadata$/metadata\n    workers = "1024"/' "$keys/worker/load.key"
    "$bin/akctl" keys new bench --role operator --dir "$keys" >/dev/null
    server_secret="$dir/server/server/akcoord.key_secret"
    server_pub="$dir/server/server/akcoord.key"
    load_cert="$keys/worker/load.key_secret"
    ctl_cert="$keys/operator/bench.key_secret"
}

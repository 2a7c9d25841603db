#!/bin/sh
# ops/setup.sh: install what is missing, build akfleet, run the demo.
#
#   ops/setup.sh [DEMO OPTIONS]     e.g. ops/setup.sh --workers 4 --keep (the options: akctl demo --help)
#
# Debian 12.  Installs the build dependencies with apt-get (only those that
# are missing; sudo when not root), configures and builds into build/
# (RelWithDebInfo, warnings not fatal; $AK_BUILD_DIR to build elsewhere,
# $AK_JOBS for the parallelism), then runs `build/bin/akctl demo` with the arguments given:
# a private coordinator and two workers tune the built-in batch on this host
# and print the report.  The exit code is the demo's (0: every operator got
# a result).
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/ops/deps.sh"

build="${AK_BUILD_DIR:-$root/build}"
ak_install_deps
ak_install_optional_deps
# Warnings are errors in ops/test.sh (and CI), not here: an install must not
# fail because a newer compiler found something new to say.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_WERROR=OFF
cmake --build "$build" -j "$(ak_jobs)"
echo
exec "$build/bin/akctl" demo "$@"

#!/bin/sh
# ops/bundle.sh: build akfleet as a self-contained bundle for hosts without
# its libraries (a GPU host with no ZeroMQ, LMDB, protobuf-c ... installed).
#
#   ops/bundle.sh [BUILD_DIR]        default: build-bundle
#
# The programs and test binaries are linked with a DT_RPATH of $ORIGIN/lib
# (and $ORIGIN/../bin/lib for tests), and every shared library they need is
# copied into BUILD_DIR/bin/lib except glibc's own and the compiler runtime,
# which every Linux host has.  Copy or carry BUILD_DIR and run bin/akworker
# (bin/ak-nvrtc beside it: the CUDA backend's compile helper).
# libakprofile.so goes into bin/lib too and the Python binding into
# bin/python (akctl gate finds both there; PYTHONPATH=BUILD_DIR/bin/python
# for a program of your own).
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/ops/deps.sh"
build="${1:-$root/build-bundle}"
ak_install_deps
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_BUNDLE=ON -DAK_WERROR=OFF >/dev/null
cmake --build "$build" -j "$(ak_jobs)"
lib="$build/bin/lib"
mkdir -p "$lib"
cp -L "$build/lib/libakprofile.so" "$lib/libakprofile.so"
rm -rf "$build/bin/python"
mkdir -p "$build/bin/python"
cp -R "$root/lib/akprofile/python/akprofile" "$build/bin/python/akprofile"
rm -rf "$build/bin/python/akprofile/__pycache__"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libgcc_s|libstdc\+\+)'
for f in "$build"/bin/akcoord "$build"/bin/akworker "$build"/bin/ak-nvrtc "$build"/bin/akctl "$build"/tests/test_* \
         "$build"/tests/bench_* "$build"/bin/lib/libakdiscover.so "$build"/bin/akd-nvtx-probe \
         "$lib/libakprofile.so"; do
    [ -x "$f" ] || continue
    ldd "$f" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
        echo "$name" | grep -Eq "$skip" && continue
        [ -e "$lib/$name" ] || cp -L "$path" "$lib/$name"
    done
done
# libakdiscover.so (akctl discover's injection library) is built into bin/lib
# where the CUDA headers are; akctl finds it there as $ORIGIN/lib.
if [ -e "$lib/libakdiscover.so" ]; then
    echo "bundle: akctl discover: $lib/libakdiscover.so"
else
    echo "bundle: akctl discover: no libakdiscover.so (built without CUDA headers): only --from-trace works"
fi
n=$(ls "$lib" | wc -l)
echo "bundle: $build/bin ($n libraries in bin/lib, $(du -sh "$build/bin" | cut -f1))"

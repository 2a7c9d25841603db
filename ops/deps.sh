# ops/deps.sh: the Debian packages akfleet needs, installed when missing.
#
# Sourced by ops/setup.sh and ops/test.sh (POSIX sh).  Checks each package
# with dpkg first, so a machine that has everything is left alone: no
# `apt-get update`, no sudo.  Only when something is missing does it run
# `apt-get update` and `apt-get install` (through sudo when not root).

# The Debian packages (cpack -G DEB, cmake/install.cmake) need nothing more:
# CPack writes the .deb itself, and tests/integration/test_packages.c reads
# them with dpkg and dpkg-deb (dpkg is essential on Debian) and readelf
# (binutils, from build-essential).
# clang and its runtime libraries (libFuzzer) build the fuzz targets that
# ops/test.sh runs after the suite (ops/fuzz.sh).  python3 runs the Python
# binding's tests (lib/akprofile/python, tests/unit/test_akprofile_py.c).
# libmicrohttpd serves the --metrics endpoint of akcoord and akworker
# (common/metrics_http.c).
AK_DEPS="build-essential cmake pkg-config libzmq3-dev libczmq-dev libprotobuf-c-dev
protobuf-c-compiler liblmdb-dev lmdb-utils libsodium-dev libjansson-dev libcmocka-dev
libmicrohttpd-dev clang libclang-rt-14-dev python3"

# Prints the packages of $AK_DEPS that are not installed.
ak_missing_deps () {
    for pkg in $AK_DEPS; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            printf '%s\n' "$pkg"
        fi
    done
}

# Installs what is missing; fails with a message when it cannot.
ak_install_deps () {
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        echo "ops/deps.sh: no dpkg/apt-get here; install by hand: $AK_DEPS" >&2
        return 1
    fi
    missing=$(ak_missing_deps | tr '\n' ' ')
    if [ -z "$missing" ]; then
        echo "deps: all installed"
        return 0
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "ops/deps.sh: missing $missing and not root, and there is no sudo" >&2
            return 1
        fi
        sudo="sudo"
    fi
    echo "deps: installing $missing"
    # shellcheck disable=SC2086  # word splitting of the package list is wanted
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
}

# Optional test dependencies: chromium renders report.html headlessly in
# tests/integration/test_report_html.c (skipped with a message without it).
AK_OPTIONAL_DEPS="chromium"

# Installs the optional packages that are missing, best effort: never fails,
# says what it could not install.  ops/setup.sh runs it; ops/test.sh runs it
# only with AK_OPTIONAL_DEPS_INSTALL=1 (it may need the network).
ak_install_optional_deps () {
    command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 || return 0
    missing=""
    for pkg in $AK_OPTIONAL_DEPS; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing="$missing $pkg"
        fi
    done
    [ -z "$missing" ] && return 0
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "deps: optional$missing not installed (not root, no sudo)"; return 0; }
        sudo="sudo"
    fi
    echo "deps: installing optional$missing"
    # shellcheck disable=SC2086
    { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; } ||
        echo "deps: optional$missing could not be installed; the tests that need it skip"
    return 0
}

# Parallel build jobs: $AK_JOBS, else the number of CPUs.
ak_jobs () {
    if [ -n "${AK_JOBS:-}" ]; then
        printf '%s\n' "$AK_JOBS"
    else
        nproc 2>/dev/null || echo 2
    fi
}

# deps.sh - sourced by demo.sh and check.sh: installs the Debian packages
# tensorrun needs to build and test, when any is missing.
#   install_deps [EXTRA PACKAGES...]

TR_PACKAGES="build-essential autoconf automake libtool pkg-config
  libyaml-dev libzstd-dev zlib1g-dev libjansson-dev librandom123-dev libopenblas-dev"
# what make fuzz and the fuzz smoke run of make check build with: clang,
# and its libFuzzer runtime, which Debian packages apart
TR_FUZZ_PACKAGES="clang libclang-rt-14-dev"
# what the one-node Slurm cluster of tests/cli/slurm.bats runs on
TR_CLUSTER_PACKAGES="slurm-wlm munge"

install_deps() {
    missing=
    for p in $TR_PACKAGES "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
            missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing" >&2
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
            echo "error: these packages are missing and installing them needs root:$missing" >&2
            return 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    ${SUDO:-} apt-get update -qq &&
        ${SUDO:-} apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

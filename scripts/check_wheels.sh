#!/bin/sh
# Do the pinned requirements install from wheels on macOS (Apple silicon) and Windows (x64)? A pin without a wheel
# for one of them would make `pip install` compile from source there, or fail, on a user's laptop.
#
# `uv pip compile --python-platform` resolves with the target's environment markers (`pip download --platform`
# evaluates them for this Linux machine and asks for Linux-only nvidia-* packages), and `--only-binary :all:` refuses
# source distributions. It needs the package registry (PyPI); about 5 s a target once uv's cache is warm.
#
#   sh scripts/check_wheels.sh [requirements.txt]
#   TARGETS="x86_64-apple-darwin" PYTHONS="3.11 3.13" MACOSX_DEPLOYMENT_TARGET=13.0 sh scripts/check_wheels.sh
#     (Intel Macs: ONNX Runtime's last wheel for them, 1.23.2, is for macOS 13 and Python 3.10-3.13; .ci/run runs it)
#
# TARGETS: uv platform names; PYTHONS: Python versions (the oldest supported and the newest python.org offers).
set -u
cd "$(dirname "$0")/.."
REQUIREMENTS=${1:-requirements.txt}
UV=${UV:-.venv/bin/uv}
TARGETS=${TARGETS:-"aarch64-apple-darwin x86_64-pc-windows-msvc"}
PYTHONS=${PYTHONS:-"3.11 3.14"}
# The oldest macOS the wheels may ask for: macOS 14 (torch's arm64 wheels are built for 14.0).
export MACOSX_DEPLOYMENT_TARGET=${MACOSX_DEPLOYMENT_TARGET:-14.0}

if ! command -v "$UV" >/dev/null 2>&1; then
    echo "check_wheels: $UV not found; install the development tools first (make install-dev)" >&2
    exit 2
fi

label() {
    case "$1" in
        aarch64-apple-darwin) echo "macOS on Apple silicon (arm64)" ;;
        x86_64-apple-darwin) echo "macOS on Intel (x86_64)" ;;
        x86_64-pc-windows-msvc) echo "Windows x64" ;;
        *) echo "$1" ;;
    esac
}

status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in $TARGETS; do
    for python in $PYTHONS; do
        if "$UV" pip compile "$REQUIREMENTS" --python-platform "$target" --python-version "$python" \
                --only-binary :all: --no-header --quiet --output-file /dev/null >"$log" 2>&1; then
            echo "check_wheels: ok: every pin in $REQUIREMENTS has a wheel for $(label "$target"), Python $python"
        else
            status=1
            echo "check_wheels: FAILED: $REQUIREMENTS does not install from wheels on $(label "$target")," \
                 "Python $python ($target). A pin there has no wheel (or no version fits); uv says:" >&2
            sed 's/^/    /' "$log" >&2
        fi
    done
done
exit $status

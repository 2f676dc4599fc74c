#!/usr/bin/env bash
# The long fuzz run: every target in turn for SECONDS each (default 600).
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   fuzz/run.sh [SECONDS]
# FUZZ_BUILD_ARGS passes build options (e.g. "--codegen-units 16", a faster build on few
# cores); use the same ones every time, or cargo rebuilds everything.
# A crash stops that target only; its input is written to fuzz/artifacts/<target>/ and
# the script exits non-zero at the end. Reproduce with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<crash-file>
set -uo pipefail

seconds="${1:-600}"
cd "$(dirname "$0")/.."

# The decoder and checkpoint targets write a file per input: keep that off the disk.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi

failed=()
for target in hints json csv checkpoint; do
    # New inputs go to fuzz/work (ignored by git); fuzz/corpus keeps the committed seeds.
    mkdir -p "fuzz/work/$target"
    echo "== $target: ${seconds}s"
    # shellcheck disable=SC2086 # FUZZ_BUILD_ARGS is a list of options
    if ! nice -n 10 cargo +nightly fuzz run ${FUZZ_BUILD_ARGS:-} "$target" \
        "fuzz/work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "crashed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
echo "no crashes in ${seconds}s per target"

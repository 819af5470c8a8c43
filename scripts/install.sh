#!/usr/bin/env bash
# Install stsreg and its pinned stack (requirements.lock) into one Python environment. The one install path:
# `make install` (editable, .venv), the worker image (Dockerfile: non-editable, CUDA torch kept) and the wheel test
# (tests/integration/test_wheel.py: a fresh venv, non-editable, offline) all run this script.
#
#   scripts/install.sh --python .venv/bin/python --editable          # a development checkout
#   scripts/install.sh --python /usr/bin/python3 --keep-torch         # a GPU image whose base has CUDA torch 2.13.0
#   scripts/install.sh --python venv/bin/python --wheel dist/stsreg-0.1.0-py3-none-any.whl --offline
#
# Options: --editable (pip -e .), --wheel FILE (install that wheel instead of the source tree), --keep-torch (never
# install torch: the lock pins the CPU build, a CUDA base image brings its own of the same version), --offline (uv's
# cache only), --find-links DIR (a folder of wheels, e.g. the local CPU torch; default /opt/wheels when it exists).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=python3 EDITABLE=0 WHEEL="" KEEP_TORCH=0 OFFLINE=() FIND_LINKS=()
[ -d /opt/wheels ] && FIND_LINKS=(--find-links /opt/wheels)
while [ $# -gt 0 ]; do
  case "$1" in
    --python) PYTHON="$2"; shift 2 ;;
    --editable) EDITABLE=1; shift ;;
    --wheel) WHEEL="$2"; shift 2 ;;
    --keep-torch) KEEP_TORCH=1; shift ;;
    --offline) OFFLINE=(--offline); shift ;;
    --find-links) FIND_LINKS=(--find-links "$2"); shift 2 ;;
    *) echo "install.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
"$PYTHON" -m pip --version >/dev/null 2>&1 || { echo "install.sh: $PYTHON has no pip" >&2; exit 2; }
UV="$(dirname "$PYTHON")/uv"
if [ ! -x "$UV" ]; then
  if command -v uv >/dev/null; then UV="$(command -v uv)"; else "$PYTHON" -m pip install -q --disable-pip-version-check uv; fi
fi
uvpip() { "$UV" pip "$1" -q --python "$PYTHON" "${OFFLINE[@]}" "${FIND_LINKS[@]}" "${@:2}"; }
LOCK=requirements.lock
if [ "$KEEP_TORCH" = 1 ]; then
  LOCK="$(mktemp)"; grep -v '^torch==' requirements.lock > "$LOCK"
fi
uvpip install -r "$LOCK"
# the package itself without dependencies: the lock above is the whole, pinned set
if [ -n "$WHEEL" ]; then uvpip install --no-deps --reinstall "$WHEEL"
elif [ "$EDITABLE" = 1 ]; then uvpip install --no-deps -e .
else uvpip install --no-deps --reinstall .
fi
"$PYTHON" -c "import stsreg, torch; print('stsreg', stsreg.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"

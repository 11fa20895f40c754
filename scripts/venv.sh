# Sourced by demo.sh and test.sh: create/refresh the repository's virtual environment.
# torch is installed first, pinned, so pip takes the local CPU build instead of the CUDA wheels.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRA="${1:-test}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
    "${PIP[@]}" "torch==2.13.0"
fi
"${PIP[@]}" -e "$ROOT[$EXTRA]" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import neobench" || { echo "neobench failed to install" >&2; exit 1; }
export PATH="$VENV/bin:$PATH"

# Sourced by demo.sh and test.sh: create/refresh the repository's virtual environment.
# torch is installed first, pinned, so pip takes the local CPU build instead of the CUDA wheels.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRA="${1:-test}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# pip's output without the machine's notes about absent local indexes; a failure still fails.
pip_quiet() {
    local log
    log="$(mktemp)"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >"$log" 2>&1; then
        grep -v "^WARNING: Location" "$log" >&2 || true
        rm -f "$log"
        return 1
    fi
    grep -v "^WARNING: Location" "$log" || true
    rm -f "$log"
}
TORCH="$(sed -n 's/^torch==//p' "$ROOT/constraints/tested.txt")"
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH')" 2>/dev/null; then
    pip_quiet "torch==$TORCH"
fi
# The exact versions the suite is tested on (constraints/tested.txt); pyproject.toml's ranges
# are what a user's install may pick.
pip_quiet -c "$ROOT/constraints/tested.txt" -e "$ROOT[$EXTRA]"
"$VENV/bin/python" -c "import neobench" || { echo "neobench failed to install" >&2; exit 1; }
export PATH="$VENV/bin:$PATH"

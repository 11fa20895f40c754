#!/usr/bin/env bash
# The test suite: offline, CPU only, reads real data from ../shared/data (or $NEOBENCH_SHARED).
set -euo pipefail
source "$(dirname "$0")/venv.sh" test
cd "$ROOT"
ruff check neobench tests benchmarks
# pytest exits 5 when it collected no test: that is a failure here like any non-zero code.
python -m pytest -q "$@"

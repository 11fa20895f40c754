"""The example printed under each command's --help (one place, so cli.py stays readable)."""

from __future__ import annotations

from neobench.protocol.config import DEFAULT_BENCHMARK

# The example under each command's --help.
EXAMPLES = {
    "main": f"""examples:
  neobench eval --model sentence-transformers/all-MiniLM-L6-v2 --tasks STSBenchmark --data-dir DIR
  neobench data verify DIR --benchmark "{DEFAULT_BENCHMARK}"
  neobench ls tasks
Each command has --help with an example.""",
    "glue": """example (offline, the CPU grid, three seeds):
  neobench glue --model chandar-lab/NeoBERT --tasks rte,mrpc,stsb --grid small --seeds 0,1,2 \\
    --data-dir ../shared/data/glue --output results
The paper's grid (40 points a task): --grid paper; the paper's selection on validation:
--set select_on=validation.""",
    "eval": """example (offline, on a mirror):
  neobench eval --model sentence-transformers/all-MiniLM-L6-v2 --tasks STSBenchmark,BIOSSES \\
      --data-dir /data/mteb-mirror --results runs/eval
  neobench eval --model runs/my-finetuned-model --shard 2/8    # job 2 of 8

Results land in <results>/results/<org__model>/<revision>/<Task>.json (mteb's layout; read them
with mteb.ResultCache(<results>).load_results()). Runs under non-standard conditions (another
instruction profile or max length) go to .../<revision>/experiments/<conditions>/ (read them with
load_results(load_experiments="match_name")). Finished tasks are skipped on a re-run.""",
    "finetune": """examples:
  neobench finetune --model chandar-lab/NeoBERT --output runs/neobert-2k
  neobench finetune --model runs/base --data-dir /data/mirror --output runs/sts \\
      datasets=STSBENCHMARK max_steps=10 batch_size=16
  torchrun --nproc_per_node 8 -m neobench finetune --model BAAI/bge-base-en-v1.5 --output runs/bge
  neobench finetune --model ... --output runs/neobert-2k --resume   # from the last checkpoint
Overrides (key=value) change recipe values; they are recorded and change the recipe hash.""",
    "table": """examples:
  neobench table --results runs/eval --reference paper
  neobench table --results runs/eval --models sentence-transformers/all-MiniLM-L6-v2 --format md \\
      --out table.md --plot table.png
  neobench table --results runs/eval --per-task --format csv --out per_task.csv --strict""",
    "plan": """examples:
  neobench plan --results runs/pilot                 # the difference 3 seeds per backbone detect
  neobench plan --results runs/pilot --delta 0.5 --seeds 5""",
    "overlap": """examples:
  neobench overlap --manifest neobert-mteb --data-dir /data/mteb-mirror
  neobench overlap --manifest sample-local --train-data-dir data/finetune --data-dir mirror \\
      --tasks STS12,STSBenchmark --results runs/eval --decontaminated --json overlap.json""",
    "compare": """examples:
  neobench compare --results runs/eval --baseline bert-base-uncased
  neobench compare --results runs/eval --baseline bert-base-uncased --models neobench/neobert \\
      --out compare.json --resamples 2000 --seed 1""",
    "publish": """examples:
  neobench publish --results runs/table4-base --model table4-base/NeoBERT \\
      --name my-lab/neobert-neobench --out publish/neobert
  neobench publish --results runs/eval --model my-lab/model --out publish/model \\
      --submit ~/src/results --push-to-hub my-lab/model --verify 2""",
    "ls": """examples:
  neobench ls tasks --benchmark "MTEB(eng, v2)"
  neobench ls profiles
  neobench ls recipes
  neobench ls keys --recipe neobert-mteb-2k      # every recipe value, its source and note
  neobench ls datasets --recipe neobert-mteb-2k""",
    "prefetch": f"""example (on a machine with hub access):
  neobench data prefetch --benchmark "{DEFAULT_BENCHMARK}" --out /data/mteb-mirror
then copy /data/mteb-mirror to the air-gapped machine and pass --data-dir /data/mteb-mirror.""",
    "verify": f"""example (offline):
  neobench data verify /data/mteb-mirror --benchmark "{DEFAULT_BENCHMARK}" --tasks SciFact,STS12""",
    "check": """examples:
  neobench data check --manifest neobert-mteb                  # on the hub (connected machine)
  neobench data check --manifest neobert-mteb --data-dir /data/mteb-mirror     # offline
  neobench data check --manifest sample-local --data-dir ../shared/data/finetune
Exit 2 when a row has a problem (one line each, with the fix); rows that could not be checked
(not in the mirror, hub off) are listed with why and are not a failure.""",
    "bench": """examples (offline, on the mirror):
  neobench bench gpu --data-dir DIR --json gpu.json --markdown gpu.md     # on one GPU, < 10 min
  neobench bench gpu --device cpu --size tiny --dtype fp16 --score-tasks BIOSSES --data-dir DIR""",
    "cache": """examples:
  neobench cache info     # embeddings stored, bytes on disk, full integrity check (exit 1: damaged)
  neobench cache clear    # delete the cache files (also damaged ones) and start an empty cache""",
    "validate": """example:
  neobench validate    # every shipped recipe, manifest and instruction profile, offline""",
}
EXAMPLES["reproduce"] = """examples:
  neobench reproduce --model sentence-transformers/all-MiniLM-L6-v2 --official remote
  neobench reproduce --model ./all-MiniLM-L6-v2 --as sentence-transformers/all-MiniLM-L6-v2 \\
      --official ~/results --tasks STS13,STSBenchmark --data-dir /data/mteb-mirror
exit 0: every task within the tolerance; 1: a task outside it (its cause named); 2: bad input"""
EXAMPLES["data"] = "\n".join(EXAMPLES[k] for k in ("prefetch", "verify", "check"))
EXAMPLES["study"] = """examples (offline, on the mirror):
  NEOBENCH_DATA_DIR=../shared/data/hub neobench study run studies/tiny.yaml
  neobench study run studies/table4-base.yaml --dry-run   # the jobs, their resources, what is done
  neobench study run studies/glue-base.yaml --dry-run     # the paper's GLUE grid: jobs, GPU-hours
  neobench study status studies/tiny.yaml
  neobench study table studies/tiny.yaml
A study runs `neobench finetune`, `neobench eval --shard K/N` and `neobench table` for each
model and seed, and `neobench glue --point KEY` for each task, grid point and seed of its glue
section; a re-run skips every finished piece (docs/studies.md describes the file)."""

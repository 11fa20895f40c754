"""Commands that only read files or print must not import torch, transformers or
sentence-transformers: each runs here in a fresh interpreter, which then reports what it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "studies" / "tiny.yaml"
HEAVY = ("torch", "transformers", "sentence_transformers")

# Every command line runs through neobench.cli.main.main in one process (one interpreter start
# for them all); after each, sys.modules is read, so a heavy import is pinned on its command.
SCRIPT = """
import contextlib, io, json, sys
from neobench.cli.main import main

report = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit:  # --help
            code = exit.code
    heavy = [name for name in json.loads(sys.argv[2]) if name in sys.modules]
    report.append({"argv": argv, "code": code, "heavy": heavy})
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results root in mteb's layout: one model, two STS tasks, synthetic scores."""
    import mteb
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    from neobench.protocol.tasks import load_benchmark, select_tasks

    root = tmp_path_factory.mktemp("results")
    tasks = select_tasks(load_benchmark("MTEB(eng, v1)"), ["STSBenchmark", "BIOSSES"])
    meta = ModelMeta.create_empty(overwrites={"name": "org/model-a", "revision": "r1"})
    cache = mteb.ResultCache(root)
    for task in tasks:
        scores = {
            split: {subset: {"main_score": 0.5} for subset in task.hf_subsets}
            for split in task.eval_splits
        }
        cache.save_to_cache(TaskResult.from_task_results(task, scores, evaluation_time=0.0), meta)
    return root


def test_light_commands_import_no_torch_or_transformers(results, tmp_path):
    study = [str(TINY), "--output", str(tmp_path / "study")]
    argvs = [
        ["--help"],
        *(["ls", what] for what in ("tasks", "profiles", "recipes", "keys", "datasets")),
        ["validate"],
        ["study", "status", *study],
        ["study", "run", *study, "--dry-run"],
        ["table", "--results", str(results)],
        ["table", "--results", str(results), "--format", "md"],
    ]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argvs), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=REPO,  # this checkout first on sys.path, as `python -m neobench` run here
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["code"] for r in report] == [0] * len(argvs), (report, done.stderr)
    heavy = [(" ".join(r["argv"]), r["heavy"]) for r in report if r["heavy"]]
    assert heavy == [], f"neobench {heavy[0][0]} imported {heavy[0][1]}"

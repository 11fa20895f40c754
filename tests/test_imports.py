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

# Each command line runs through neobench.cli.main.main in one process, then sys.modules is read.
SCRIPT = """
import contextlib, io, json, sys
from neobench.cli.main import main

codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            codes.append(main(argv))
        except SystemExit as exit:  # --help
            codes.append(exit.code)
heavy = [name for name in json.loads(sys.argv[2]) if name in sys.modules]
print(json.dumps({"codes": codes, "heavy": heavy}))
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


def commands(name: str, request: pytest.FixtureRequest, out: Path) -> list[list[str]]:
    if name == "table":  # the results root only where it is used
        results = str(request.getfixturevalue("results"))
        return [["table", "--results", results], ["table", "--results", results, "--format", "md"]]
    study = [str(TINY), "--output", str(out / "study")]
    return {
        "help": [["--help"]],
        "ls": [["ls", what] for what in ("tasks", "profiles", "recipes", "keys", "datasets")],
        "validate": [["validate"]],
        "study status": [["study", "status", *study]],
        "study run --dry-run": [["study", "run", *study, "--dry-run"]],
    }[name]


@pytest.mark.parametrize(
    "name", ["help", "ls", "validate", "study status", "study run --dry-run", "table"]
)
def test_light_commands_import_no_torch_or_transformers(name, request, tmp_path):
    argvs = commands(name, request, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argvs), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=REPO,  # this checkout first on sys.path, as `python -m neobench` run here
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["codes"] == [0] * len(argvs), done.stderr
    assert report["heavy"] == [], f"neobench {name} imported {report['heavy']}"

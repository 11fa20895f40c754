"""Golden outputs: what neobench prints and writes for real runs stays byte-identical.

Real runs, made once per session from real parts: the packaged all-MiniLM-L6-v2 evaluated as it
is, a 4-step fine-tune of it, and two 2-layer BERTs (from studies/tiny-bert.json) fine-tuned the
same way, one of them with two seeds (a row of seed replicates); all evaluated on four small
MTEB(eng, v1) tasks of the mirror, with per-item units. Their tables (md, csv, tex; with
--ci --baseline, and --per-task), `compare --out .json`, the dry runs of both shipped studies and
the keys of the run cards are compared with the files frozen under tests/golden/.

Paths, run-card file names and run-card hashes change from run to run (the cards record times
and hosts); they are masked before the comparison, and only they. Freeze anew, after a change
that is meant to change an output, with NEOBENCH_FREEZE_GOLDEN=1 and say so in the commit.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from neobench.cli.main import main

GOLDEN = Path(__file__).parent / "golden"
FREEZE = os.environ.get("NEOBENCH_FREEZE_GOLDEN") == "1"
TASKS = "BIOSSES,STS16,SummEval,AmazonCounterfactualClassification"
# The fine-tune: the standard recipe cut to 4 steps on STS-B's training pairs.
RECIPE = ["datasets=STSBENCHMARK", "max_steps=4", "batch_size=8", "max_seq_length=64",
          "checkpoint_every=100"]  # fmt: skip
BASELINE = "golden/MiniLM"

pytestmark = pytest.mark.slow


def cli(*argv) -> None:
    code = main([str(a) for a in argv])
    assert code == 0, argv


def tiny_model(folder: Path, minilm: Path, seed: int) -> Path:
    """A 2-layer BERT from studies/tiny-bert.json, seeded, with MiniLM's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    values = json.loads((REPO / "studies" / "tiny-bert.json").read_text())
    torch.manual_seed(seed)
    AutoModel.from_config(AutoConfig.for_model(**values)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def golden_runs(tmp_path_factory, minilm, mirror) -> Path:
    """The results root ``<root>/runs`` of the real runs described above; returns ``<root>``."""
    root = tmp_path_factory.mktemp("golden")
    models = root / "models"
    tiny = tiny_model(models / "tiny-bert", minilm, 0)
    tiny_b = tiny_model(models / "tiny-bert-b", minilm, 1)
    data = ["--data-dir", mirror]
    cli("finetune", "--model", minilm, "--output", models / "minilm-ft", *data, *RECIPE)
    seeds = ["--seeds", "0,1"]
    cli("finetune", "--model", tiny, "--output", models / "tiny-ft", *seeds, *data, *RECIPE)
    cli("finetune", "--model", tiny_b, "--output", models / "tiny-b-ft", *data, *RECIPE)
    evaluated = {
        "golden/MiniLM": minilm,
        "golden/MiniLM-ft": models / "minilm-ft",
        "golden/tiny-bert": models / "tiny-ft-seed0",
        "golden/tiny-bert-b": models / "tiny-b-ft",
    }
    evaluated_seed1 = {"golden/tiny-bert": models / "tiny-ft-seed1"}
    for name, folder in [*evaluated.items(), *evaluated_seed1.items()]:
        cli("eval", "--model", folder, "--model-name", name, "--results", root / "runs",
            "--tasks", TASKS, "--max-seq-length", "128", "--data-dir", mirror)  # fmt: skip
    return root


def mask(text: str, root: Path) -> str:
    """The parts that differ between two runs of the same commands: where the runs were made,
    the run cards' file names and their hashes."""
    text = text.replace(str(root), "<root>").replace(str(REPO), "<repo>")
    text = re.sub(r"run-[\w.:+-]+?\.yaml", "run-<card>.yaml", text)
    return re.sub(r"sha256:[0-9a-f]{12}", "sha256:<card>", text)


def outputs(root: Path, tmp: Path) -> dict[str, str]:
    """Every golden output, by file name, made by the CLI from the runs under ``root``."""
    found: dict[str, str] = {}
    results = root / "runs"
    common = ["--results", results, "--reference", "paper", "--ci", "--baseline", BASELINE]
    for suffix in ("md", "csv", "tex"):
        for variant, extra in (("", []), ("-per-task", ["--per-task"])):
            out = tmp / f"table{variant}.{suffix}"
            cli("table", *common, *extra, "--out", out)
            found[out.name] = out.read_text()
    out = tmp / "compare.json"
    cli("compare", "--results", results, "--baseline", BASELINE, "--out", out)
    found[out.name] = out.read_text()
    return {name: mask(text, root) for name, text in found.items()}


def card_keys(root: Path) -> str:
    """The keys of the run cards (dotted paths), eval and fine-tune, of one fine-tuned model."""

    def keys(data: object, prefix: str = "") -> list[str]:
        if not isinstance(data, dict):
            return []
        out = []
        for key, value in data.items():
            path = f"{prefix}{key}"
            out += [path, *keys(value, path + ".")]
        return out

    folder = next((root / "runs" / "results").glob("golden__MiniLM-ft/*/experiments/*/neobench"))
    [eval_card] = sorted(folder.glob("run-*.yaml"))
    tune_card = root / "models" / "minilm-ft" / "neobench_run_card.yaml"
    lines = ["# eval run card", *sorted(keys(yaml.safe_load(eval_card.read_text())))]
    lines += ["# fine-tune run card", *sorted(keys(yaml.safe_load(tune_card.read_text())))]
    return "\n".join(lines) + "\n"


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if FREEZE:
        path.write_text(text)
        return
    assert path.is_file(), f"{path} missing: freeze with NEOBENCH_FREEZE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from {path}"


def test_tables_and_comparison_are_unchanged(golden_runs, tmp_path):
    for name, text in outputs(golden_runs, tmp_path).items():
        check(name, text)


def test_run_card_keys_are_unchanged(golden_runs):
    check("card-keys.txt", card_keys(golden_runs))


@pytest.mark.parametrize("study", ["tiny", "table4-base"])
def test_study_dry_runs_are_unchanged(study, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["study", "run", f"studies/{study}.yaml", "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0
    check(f"study-{study}-dry-run.txt", mask(captured.out + captured.err, Path("/nonexistent")))

"""Golden outputs: what neobench prints and writes for real runs stays byte-identical.

Real runs, made once per session from real parts (conftest.golden_runs: MiniLM as it is, a
4-step fine-tune of it, two 2-layer BERTs fine-tuned the same way, one of them with two seeds;
four small MTEB(eng, v1) tasks of the mirror, with per-item units). Their tables (md, csv, tex,
json; with --ci --baseline, and --per-task), `compare --out .json`, the dry runs of both shipped
studies and the keys of the run cards are compared with the files frozen under tests/golden/.

Paths, run-card file names and run-card hashes change from run to run (the cards record times
and hosts); they are masked before the comparison, and only they. Freeze anew, after a change
that is meant to change an output, with NEOBENCH_FREEZE_GOLDEN=1 and say so in the commit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from conftest import GOLDEN_BASELINE as BASELINE
from conftest import REPO, cli

from neobench.cli.main import main

GOLDEN = Path(__file__).parent / "golden"
FREEZE = os.environ.get("NEOBENCH_FREEZE_GOLDEN") == "1"

pytestmark = pytest.mark.slow


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
    for suffix in ("md", "csv", "tex", "json"):
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

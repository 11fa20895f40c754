"""Golden outputs: what neobench prints and writes for real runs stays byte-identical.

The tables (md, csv, tex, json; with --ci --baseline, --per-task, and --ranks --per-type) and
`compare --out .json` of the real runs frozen under tests/golden/runs (conftest.golden_runs:
MiniLM as it is, a 4-step fine-tune of it, two 2-layer BERTs fine-tuned the same way, one of them
with two seeds; four small MTEB(eng, v1) tasks of the mirror, with per-item units), the dry runs
of both shipped studies, and the keys of the run cards of a fine-tune and an eval made here, are
compared with the files frozen under tests/golden/.

The report reads frozen results, not runs made afresh, so that its numbers are the same on every
CPU (a fine-tune's last bits are not: see conftest). Numbers are still compared with a guard of
one unit of their last printed digit (0.15 for scores x100 and 0.01 for fractions printed at full
precision), for libraries that sum in another order on another machine; whole numbers (counts,
seeds, resamples), every word, mark (▲ ▼ †) and layout character must match exactly.

Paths, run-card file names and run-card hashes are masked before the comparison. Freeze anew,
after a change that is meant to change an output, with NEOBENCH_FREEZE_GOLDEN=1 (it makes the
runs again and replaces tests/golden/runs too) and say so in the commit.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import FREEZE, GOLDEN, GOLDEN_RECIPE, REPO, cli
from conftest import GOLDEN_BASELINE as BASELINE

from neobench.cli.main import main
from neobench.compat.patches import ENV

pytestmark = pytest.mark.slow


def mask(text: str, root: Path) -> str:
    """The parts that differ between two runs of the same commands: where the runs were made,
    the run cards' file names and their hashes."""
    text = text.replace(str(root), "<root>").replace(str(REPO), "<repo>")
    text = re.sub(r"run-[\w.:+-]+?\.yaml", "run-<card>.yaml", text)
    text = re.sub(r"local-[0-9a-f]{16}", "local-<weights>", text)
    return re.sub(r"sha256:[0-9a-f]{12}", "sha256:<card>", text)


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _close(made: str, frozen: str) -> bool:
    if made == frozen:
        return True
    if not any(c in made + frozen for c in ".eE"):
        return False  # whole numbers: exactly
    a, b = float(made), float(frozen)
    digits = max(len(x.split(".")[1]) if "." in x else 0 for x in (made, frozen))
    if digits <= 2:  # rounded for a table: one unit of the last digit
        return abs(a - b) <= 1.001 * 10.0**-digits
    return abs(a - b) <= (0.15 if max(abs(a), abs(b)) >= 1 else 0.01)


def differences(made: str, frozen: str) -> list[str]:
    """The numbers of ``made`` that differ from ``frozen``'s beyond the CPU's last bits (see the
    module's doc); the text around them is compared by the caller."""
    pairs = zip(NUMBER.findall(made), NUMBER.findall(frozen), strict=True)
    return [f"{a} instead of {b}" for a, b in pairs if not _close(a, b)]


# The tables' variants beside --ci --baseline: per task, and ranked on Avg. and each type.
VARIANTS = (("", []), ("-per-task", ["--per-task"]), ("-ranks", ["--ranks", "--per-type"]))


def outputs(root: Path, tmp: Path) -> dict[str, str]:
    """Every golden output, by file name, made by the CLI from the runs under ``root``."""
    found: dict[str, str] = {}
    results = root / "runs"
    common = ["--results", results, "--reference", "paper", "--ci", "--baseline", BASELINE]
    for suffix in ("md", "csv", "tex", "json"):
        for variant, extra in VARIANTS:
            out = tmp / f"table{variant}.{suffix}"
            cli("table", *common, *extra, "--out", out)
            found[out.name] = out.read_text()
    out = tmp / "compare.json"
    cli("compare", "--results", results, "--baseline", BASELINE, "--out", out)
    found[out.name] = out.read_text()
    return {name: mask(text, root) for name, text in found.items()}


@pytest.fixture(scope="module")
def fresh_cards(tmp_path_factory, minilm, mirror) -> tuple[Path, Path]:
    """The run cards of a fine-tune and an eval made now (the frozen runs' cards are as old as
    their freeze): a 4-step fine-tune of MiniLM evaluated on BIOSSES (a card's keys name its
    tasks; one task shows their every key)."""
    root = tmp_path_factory.mktemp("cards")
    model = root / "minilm-ft"
    # The keys of the default path, the patches in force (with one off, a card also says why).
    with pytest.MonkeyPatch.context() as patched:
        patched.delenv(ENV, raising=False)
        cli("finetune", "--model", minilm, "--output", model, "--data-dir", mirror, *GOLDEN_RECIPE)
        cli("eval", "--model", model, "--model-name", "golden/MiniLM-ft", "--results",
            root / "runs", "--tasks", "BIOSSES", "--max-seq-length", "128",
            "--data-dir", mirror)  # fmt: skip
    runs = root / "runs" / "results"
    [eval_card] = runs.glob("golden__MiniLM-ft/*/experiments/*/neobench/run-*.yaml")
    return eval_card, model / "neobench_run_card.yaml"


# Written only where this machine's libraries turn a patch off (NEOBENCH_PATCHES, an unverified
# version): not a key of every card.
MACHINE = {"library_patches_off"}
# Keyed by what this machine has measured (`neobench overlap`'s tasks): the key, not its keys.
LEAVES = {"contamination"}


def card_keys(eval_card: Path, tune_card: Path) -> str:
    """The keys of the run cards (dotted paths), eval and fine-tune, of one fine-tuned model."""

    def keys(data: object, prefix: str = "") -> list[str]:
        if not isinstance(data, dict):
            return []
        out = []
        for key, value in data.items():
            path = f"{prefix}{key}"
            if path in LEAVES:
                out.append(path)
            elif path not in MACHINE:
                out += [path, *keys(value, path + ".")]
        return out

    lines = ["# eval run card", *sorted(keys(yaml.safe_load(eval_card.read_text())))]
    lines += ["# fine-tune run card", *sorted(keys(yaml.safe_load(tune_card.read_text())))]
    return "\n".join(lines) + "\n"


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if FREEZE:
        path.write_text(text)
        return
    assert path.is_file(), f"{path} missing: freeze with NEOBENCH_FREEZE_GOLDEN=1"
    frozen = path.read_text()
    if NUMBER.split(text) != NUMBER.split(frozen):  # not only numbers: pytest shows the lines
        assert text == frozen, f"{name} differs from {path}"
    found = differences(text, frozen)
    assert not found, f"{name} differs from {path}: {found[:5]}"


def test_tables_and_comparison_are_unchanged(golden_runs, tmp_path):
    for name, text in outputs(golden_runs, tmp_path).items():
        check(name, text)


def test_run_card_keys_are_unchanged(fresh_cards):
    check("card-keys.txt", card_keys(*fresh_cards))


@pytest.mark.parametrize("study", ["tiny", "table4-base"])
def test_study_dry_runs_are_unchanged(study, capsys, monkeypatch, tmp_path):
    """Planned into an empty folder: what the demo or a user ran into the study's own output
    folder (runs/ in the repository) does not change what the plan says."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NEOBENCH_CACHE", str(tmp_path / "home"))  # no calibration kept there
    out = tmp_path / "out"
    code = main(["study", "run", f"studies/{study}.yaml", "--dry-run", "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    check(f"study-{study}-dry-run.txt", mask(captured.out + captured.err, tmp_path))

"""`neobench table --glue`: real GLUE runs of two tiny BERTs on RTE and STS-B read back in the
paper's GLUE layout, with intervals over the validation items, marks against a baseline, the
paper's rows, every writer, and the page (`--html`) in a real browser (tests/browser.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from statistics import fmean

import numpy as np
import pytest
import yaml
from conftest import tiny_model

from neobench.cli.main import main
from neobench.core.card_io import read_card, write_card
from neobench.core.errors import NeobenchError
from neobench.glue.grid import run_glue
from neobench.protocol.glue import TASKS, metrics
from neobench.report.columns import AVG, UP
from neobench.report.glue import VALIDATION_TAG, glue_table
from neobench.report.page import PAIR_FIELDS
from neobench.report.render import table as render

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"
QUICK = {"epochs": "1", "train_rows": "160", "heldout_max_rows": "200", "max_seq_length": "64"}


def _grid(folder: Path) -> str:
    path = folder / "grid.yaml"
    path.write_text("learning_rate: [1e-4]\nbatch_size: [16]\n")  # YAML 1.1 reads 1e-4 as text
    return str(path)


@pytest.fixture(scope="module")
def roots(tmp_path_factory, minilm) -> dict[str, Path]:
    """Two tiny BERTs (another seed each) on RTE and STS-B, two seeds each; one more on RTE
    with selection on validation, the paper's way."""
    base = tmp_path_factory.mktemp("glue-table")
    grid, found = _grid(base), {}
    for name, seed, overrides in (("tiny-a", 0, {}), ("tiny-b", 1, {}),
                                  ("tiny-v", 2, {"select_on": "validation"})):  # fmt: skip
        model = tiny_model(base / name, minilm, seed)
        tasks = ["rte"] if overrides else ["rte", "stsb"]
        run_glue(
            str(model), tasks, str(base / f"out-{name}"), grid=grid, seeds=[0] if overrides
            else [0, 1], overrides=QUICK | overrides, data_dir=str(GLUE_DATA), model_name=name,
            device="cpu", say=lambda _: None,
        )  # fmt: skip
        found[name] = base / f"out-{name}"
    return found


def _cards(root: Path, task: str) -> list[dict]:
    return [read_card(p) for p in sorted(root.glob(f"glue/*/*/{task}/*/seed-*/point.yaml"))]


def test_cells_are_the_selected_points_mean_over_seeds(roots) -> None:
    table = glue_table([roots["tiny-a"], roots["tiny-b"]], ci=True, reference="paper")
    assert table.task_names == ["RTE", "STS-B"]  # the paper's column order, the tasks held
    row = table.row("tiny-a")
    rte = [c["validation"]["validation"]["score"] for c in _cards(roots["tiny-a"], "rte")]
    assert len(rte) == 2 and row.tasks["RTE"] == pytest.approx(100 * fmean(rte))
    assert row.avg == pytest.approx(fmean([row.tasks["RTE"], row.tasks["STS-B"]]))
    assert row.avg_of == (2, 8) and row.identity["seeds"] == [0, 1]
    # The precision the runs ran in (a CPU: fp32), not the recipe's "bf16" (autocast on CUDA).
    assert {c["precision"] for c in _cards(roots["tiny-a"], "rte")} == {"fp32"}
    assert {c["attention"] for c in _cards(roots["tiny-a"], "rte")} <= {"sdpa", "eager"}
    assert row.conditions["mixed_precision"] == "fp32"
    for column in ("RTE", "STS-B", AVG):  # a 95% interval around each cell, seeds resampled too
        low, high = row.ci[column]
        value = row.avg if column == AVG else row.tasks[column]
        assert low <= value <= high and high > low
    assert set(row.sd) == {"RTE", "STS-B"}
    paper = table.row("NeoBERT-1024 (paper)")
    assert paper.quoted and paper.tasks == {"RTE": 91.0, "STS-B": 92.1}
    assert paper.avg == pytest.approx(fmean([91.0, 92.1]))  # recomputed over the tasks shown
    notes = " ".join(table.notes)
    assert "tiny-a: selected RTE batch_size=16,learning_rate=0.0001" in notes
    assert "WNLI is never averaged" in notes and "recomputed over the 2 tasks shown" in notes
    assert "held-out slice" in notes


def test_saved_predictions_give_the_cards_scores(roots) -> None:
    """The intervals resample predictions.json: unresampled, it gives point.yaml's numbers."""
    for folder in sorted(roots["tiny-a"].glob("glue/*/*/stsb/*/seed-*")):
        saved = json.loads((folder / "predictions.json").read_text())["validation"]
        found = metrics(TASKS["stsb"], np.array(saved["prediction"]), np.array(saved["label"]))
        card = read_card(folder / "point.yaml")["validation"]["validation"]
        assert found == pytest.approx(card)


def test_marks_against_a_baseline_follow_the_evidence(roots, tmp_path) -> None:
    """A copy of tiny-a under another name is never marked; a copy whose predictions are the
    gold labels is above on every column."""
    same = _renamed(roots["tiny-a"], tmp_path / "same", "tiny-a-again")
    perfect = _renamed(roots["tiny-a"], tmp_path / "perfect", "oracle", oracle=True)
    table = glue_table([roots["tiny-a"], same, perfect], ci=True, baseline="tiny-a")
    assert table.baseline == "tiny-a"
    assert table.row("tiny-a-again").marks == {}
    assert table.row("oracle").marks == dict.fromkeys(["RTE", "STS-B", AVG], UP)
    assert table.row("oracle").tasks["RTE"] == pytest.approx(100.0)
    assert any(n.startswith(f"{UP} / ") for n in table.notes)
    with pytest.raises(NeobenchError, match="Did you mean 'tiny-a'"):
        glue_table([roots["tiny-a"]], baseline="tiny-aa")


def _renamed(root: Path, to: Path, name: str, *, oracle: bool = False) -> Path:
    shutil.copytree(root, to)
    (card_path,) = to.glob("glue/*/*/glue-card.yaml")
    card = read_card(card_path)
    card["model"]["name"] = name
    write_card(card_path, card)
    if oracle:
        for folder in to.glob("glue/*/*/*/*/seed-*"):
            task = TASKS[folder.parent.parent.name]
            saved = json.loads((folder / "predictions.json").read_text())
            point = read_card(folder / "point.yaml")
            for split, found in saved.items():
                found["prediction"] = found["label"]
                point["validation"][split] = metrics(
                    task, np.array(found["label"]), np.array(found["label"])
                )
            (folder / "predictions.json").write_text(json.dumps(saved))
            write_card(folder / "point.yaml", point)
    return to


def test_selection_on_validation_is_marked(roots) -> None:
    table = glue_table([roots["tiny-a"], roots["tiny-v"]])
    assert table.row("tiny-v").tag == VALIDATION_TAG
    assert table.row("tiny-a").tag == ""
    assert table.row("tiny-v").missing == ["STS-B"] and table.row("tiny-v").avg_of == (1, 8)
    notes = " ".join(table.notes)
    assert f"{VALIDATION_TAG}: checkpoints and grid points chosen on the validation" in notes
    assert "select_on: heldout (tiny-a), validation (tiny-v)" in notes
    with pytest.raises(NeobenchError, match="--strict"):
        glue_table([roots["tiny-a"], roots["tiny-v"]], strict=True)


def test_every_writer(roots, tmp_path) -> None:
    table = glue_table([roots["tiny-a"], roots["tiny-b"]], ci=True, baseline="tiny-a")
    markdown = render.write(table, "md")
    assert "| Model | RTE | STS-B | Avg. | Missing |" in markdown
    csv = render.write(table, "csv").splitlines()
    header = next(line for line in csv if line.startswith("label,"))
    assert "RTE_ci_low" in header and header.endswith("transfer_from_mnli,mixed_precision")
    assert "neobert-glue v1" in next(line for line in csv if line.startswith("tiny-b,"))
    assert "zero_shot" not in header  # MTEB's notion: a GLUE row trained on each of its tasks
    record = json.loads(render.write(table, "json"))
    assert record["columns"] == ["RTE", "STS-B", AVG]
    assert not any("zero_shot" in row for row in record["rows"])
    assert "\\begin{tabular}" in render.write(table, "latex")
    frame = table.to_pandas()
    assert list(frame["label"]) == ["tiny-a", "tiny-b"] and "select_on" in frame
    assert "zero_shot" not in frame
    render.plot(table, tmp_path / "glue.png")
    assert (tmp_path / "glue.png").stat().st_size > 10_000


def test_command_line(roots, tmp_path, capsys) -> None:
    out = tmp_path / "glue.md"
    argv = ["table", "--glue", "--results", str(roots["tiny-a"]), "--reference", "paper"]
    assert main([*argv, "--ci", "--out", str(out)]) == 0
    assert "ModernBERT-base (paper)" in out.read_text()
    assert main([*argv, "--per-task", "--over", "tasks"]) == 2
    err = capsys.readouterr().err
    assert "--glue with --per-task, --over" in err and "Traceback" not in err
    assert main(["table", "--glue", "--results", str(tmp_path)]) == 2
    assert "no GLUE runs under" in capsys.readouterr().err


def test_unreadable_run_card_is_named_not_fatal(roots, tmp_path) -> None:
    copy = shutil.copytree(roots["tiny-b"], tmp_path / "b")
    broken = next(copy.glob("glue/*/*/stsb/*/seed-1/point.yaml"))
    broken.write_text("status: [unclosed\n")
    table = glue_table([copy])
    assert any(str(broken) in n and "unreadable" in n for n in table.notes)
    assert table.row("tiny-b").identity["seeds"] == [0, 1]  # RTE still has both
    assert yaml.safe_load(next(copy.glob("glue/*/*/glue-card.yaml")).read_text())


def test_python_api(roots, minilm, tmp_path) -> None:
    import neobench as nb

    frame = nb.glue_table(roots["tiny-a"], ci=True, reference="paper").to_pandas()
    row = frame.set_index("label").loc["tiny-a"]
    assert row["RTE_ci_low"] <= row["RTE"] <= row["RTE_ci_high"] and row["select_on"] == "heldout"
    with pytest.raises(NeobenchError, match="Did you mean 'baseline'"):
        nb.glue_table(roots["tiny-a"], basline="tiny-a")
    planned = nb.run_glue(
        minilm, ["rte", "sst2"], tmp_path, grid="paper", seeds=[0, 1], dry_run=True,
        data_dir=GLUE_DATA, overrides={"select_on": "validation"},
    )  # fmt: skip
    assert (planned.runs, planned.ran) == (2 * 40 * 2, 0) and not any(tmp_path.iterdir())


# ---- the page (`table --glue --html`) --------------------------------------------------------


@pytest.fixture(scope="module")
def page(roots, tmp_path_factory) -> tuple[Path, dict, list[Path]]:
    """The GLUE page of tiny-a (the baseline), tiny-b and an oracle copy, with the paper's rows."""
    folder = tmp_path_factory.mktemp("glue-page")
    results = [roots["tiny-a"], roots["tiny-b"],
               _renamed(roots["tiny-a"], folder / "perfect", "oracle", oracle=True)]  # fmt: skip
    out = folder / "glue.html"
    argv = ["table", "--glue", "--ci", "--baseline", "tiny-a", "--reference", "paper"]
    for root in results:
        argv += ["--results", str(root)]
    assert main([*argv, "--html", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)
    assert found is not None and "src=" not in text.replace('href="data:,"', "")
    return out, json.loads(found.group(1)), results


def test_the_glue_page_holds_the_table_s_numbers(page) -> None:
    """Cells, intervals, sd and marks are `table --glue`'s; each pair's significance is the
    table's mark; the ranks put the oracle first, alone in its group; no zero-shot view."""
    _, data, results = page
    table = glue_table(results, ci=True, baseline="tiny-a", reference="paper")
    view = data["views"]["all"]
    assert data["layout"] == "tasks" and view["tasks"] == table.task_names == ["RTE", "STS-B"]
    assert [t for t, _ in data["tasks"]] == ["RTE", "STS-B"]
    assert dict(data["tasks"])["STS-B"] == "Pearson, Spearman"
    assert view["computed"] == ["tiny-a", "tiny-b", "oracle"]
    for row in table.rows:
        cells = view["rows"][row.label]
        for i, column in enumerate(view["tasks"]):
            cell = cells["tasks"][i]
            assert cell["v"] == pytest.approx(row.tasks[column], abs=1e-4)
            if not row.quoted:
                assert (cell["lo"], cell["hi"]) == pytest.approx(row.ci[column], abs=1e-4)
                assert cell["sd"] == pytest.approx(row.sd[column], abs=1e-4)
            assert cell.get("m") == row.marks.get(column)
        assert cells["cells"][AVG].get("m") == row.marks.get(AVG)
    computed = view["computed"]
    base = computed.index("tiny-a")
    for label in ("tiny-b", "oracle"):
        pair = view["pairs"][f"{base}-{computed.index(label)}"]
        marked = {c for c, s in zip(pair["tasks"], pair["significant"], strict=True) if s}
        assert marked == set(table.row(label).marks)
        delta = pair["rows"][pair["tasks"].index(AVG)][PAIR_FIELDS.index("delta")]
        assert 100 * delta == pytest.approx(table.row(label).avg - table.row("tiny-a").avg,
                                            abs=1e-3)  # fmt: skip
    ranks = view["ranks"]
    assert ranks["oracle"]["rank"] == ranks["oracle"]["hi"] == 1
    assert ranks["oracle"]["group"] not in ranks["tiny-a"]["group"] + ranks["tiny-b"]["group"]
    assert "refused" in data["views"]["zero_shot"]
    assert data["compare_command"].startswith("neobench table --glue --ci --results ")


def test_the_glue_page_in_a_browser(page, browser, tmp_path, capsys) -> None:
    """From file://: a column per task, no type or zero-shot control; sort by STS-B; a cell's
    provenance names the grid point and the recipe; the drill-down shows each seed; A/B shows
    the pair's delta and a command that runs."""
    import shlex

    from browser import SHOTS, errors, rows, shoot, width
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    out, data, _ = page
    chrome = browser
    width(chrome, 1400)
    chrome.get(out.as_uri())
    assert errors(chrome) == []
    assert chrome.execute_script("return performance.getEntriesByType('resource').length") == 0
    heads = [th.text for th in chrome.find_elements(By.CSS_SELECTOR, "#board thead th")]
    assert heads == ["Model", "Rank", "Group", "RTE", "STS-B", AVG, "Missing"]
    assert not chrome.find_element(By.ID, "f-type").is_displayed()
    assert not chrome.find_element(By.ID, "f-zs").is_displayed()

    view = data["views"]["all"]
    sts = {label: row["tasks"][1]["v"] for label, row in view["rows"].items()}
    chrome.find_element(By.CSS_SELECTOR, 'button[data-key="sort:STS-B"]').click()
    assert [sts[label] for label in rows(chrome)] == sorted(sts.values(), reverse=True)

    chrome.find_element(By.CSS_SELECTOR, 'button[data-key="cell:tiny-b:RTE"]').click()
    shown = chrome.find_element(By.ID, "prov").text
    for word in ("RTE point", "batch_size=16", "seeds 0, 1", "recipe", "select on", "heldout"):
        assert word in shown, word
    chrome.find_element(By.ID, "prov-close").click()

    chrome.find_element(By.CSS_SELECTOR, 'button[data-key="drill:tiny-b"]').click()
    detail = chrome.find_element(By.CSS_SELECTOR, "tr.detail")
    lines = detail.find_elements(By.CSS_SELECTOR, ".detail-table tbody tr")
    assert [line.find_element(By.TAG_NAME, "th").text for line in lines] == ["RTE", "STS-B"]
    assert len(detail.find_elements(By.CSS_SELECTOR, "circle.seed")) == 2 * len(lines)

    Select(chrome.find_element(By.ID, "ab-a")).select_by_value("tiny-a")
    Select(chrome.find_element(By.ID, "ab-b")).select_by_value("oracle")
    computed = view["computed"]
    pair = view["pairs"][f"{computed.index('tiny-a')}-{computed.index('oracle')}"]
    delta = pair["rows"][pair["tasks"].index("RTE")][PAIR_FIELDS.index("delta")]
    cell = chrome.find_element(By.CSS_SELECTOR, '#ab-table tr[data-task="RTE"] td.delta')
    assert cell.text.split(" ")[0] == f"{100 * delta:+.1f}"
    line = chrome.find_element(By.CSS_SELECTOR, '#ab-table tr[data-task="RTE"]')
    assert "▲ B higher" in line.text
    shots = [shoot(chrome, tmp_path, "glue-1400px")]
    command = shlex.split(chrome.find_element(By.CSS_SELECTOR, "#ab-command code").text)
    assert command[:4] == ["neobench", "table", "--glue", "--ci"]
    assert command[-4:] == ["--baseline", "tiny-a", "--models", "tiny-a,oracle"]
    capsys.readouterr()
    assert main(command[1:]) == 0  # the command the page shows runs, and marks the oracle
    assert "▲" in capsys.readouterr().out

    width(chrome, 400)
    chrome.get(out.as_uri())
    shots.append(shoot(chrome, tmp_path, "glue-400px"))
    overflow = chrome.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0 and errors(chrome) == []
    with capsys.disabled():
        print("\nGLUE page screenshots: " + ", ".join(str(SHOTS / p.name) for p in shots))

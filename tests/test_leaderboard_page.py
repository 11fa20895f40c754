"""The leaderboard page (`neobench table --html`): one self-contained file whose numbers are the
engines' own, checked in Python, then driven in a real browser (Debian's chromium, headless,
through selenium and chromium-driver) from file://.

The browser (tests/browser.py) is installed by scripts/test.sh where it may install packages
(root, or CI=true); elsewhere, when it is missing, the browser test is skipped and says why; in CI
it fails.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from browser import SHOTS, errors, rows, shoot, width
from conftest import GOLDEN_BASELINE, cli

from neobench.protocol.config import DEFAULT_BENCHMARK
from neobench.report.columns import AVG
from neobench.report.compare import compare
from neobench.report.leaderboard import leaderboard
from neobench.report.page import PAIR_FIELDS, page_data
from neobench.report.render.html import to_html

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page(golden_runs, tmp_path_factory):
    """The page of the golden runs (with the paper's rows and a baseline), its data, and
    `neobench compare --out x.json` of the same runs."""
    folder = tmp_path_factory.mktemp("page")
    results = golden_runs / "runs"
    out = folder / "leaderboard.html"
    cli("table", "--results", results, "--reference", "paper", "--baseline", GOLDEN_BASELINE,
        "--html", out, "--out", folder / "table.md")  # fmt: skip
    cli("compare", "--results", results, "--baseline", GOLDEN_BASELINE, "--out", folder / "x.json")
    text = out.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)
    assert found is not None
    data = json.loads(found.group(1))
    return out, data, json.loads((folder / "x.json").read_text())


def pair(data: dict, view: str, a: str, b: str) -> dict:
    computed = data["views"][view]["computed"]
    return data["views"][view]["pairs"][f"{computed.index(a)}-{computed.index(b)}"]


def test_the_page_is_one_file_that_fetches_nothing(page):
    out, data, _ = page
    text = out.read_text(encoding="utf-8")
    assert text.count("<script") == 2 and "src=" not in text.replace('href="data:,"', "")
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)  # no CDN, no request
    assert "default-src 'none'" in text  # and the policy forbids one
    assert len(data["rows"]) == 14 and sum(r["quoted"] for r in data["rows"]) == 10


def test_every_pair_is_compares_own_rows(page, golden_runs):
    """Each ordered pair of computed rows holds what `compare --baseline A --models B` gives,
    and the CLI's compare file agrees with the page for the baseline's pairs."""
    _, data, written = page
    computed = data["views"]["all"]["computed"]
    assert len(computed) == 4
    results = [golden_runs / "runs"]
    for a in computed:
        found = compare(results, a, benchmark=DEFAULT_BENCHMARK)
        for b in computed:
            if a == b:
                continue
            mine = pair(data, "all", a, b)
            rows = [r for r in found.rows if r.label == b]
            assert mine["tasks"] == [r.task for r in rows]
            for values, significant, row in zip(mine["rows"], mine["significant"], rows,
                                                strict=True):  # fmt: skip
                assert values == [round(getattr(row, f), 6) for f in PAIR_FIELDS]
                assert significant == int(row.significant)
    base = written["baseline"]
    for row in written["rows"]:
        mine = pair(data, "all", base, row["label"])
        values = mine["rows"][mine["tasks"].index(row["task"])]
        assert values[PAIR_FIELDS.index("delta")] == round(row["delta"], 6)


def test_the_page_s_ranks_are_the_table_s(page, golden_runs):
    """The Rank and Group columns hold `table --ranks`'s numbers: one engine for both."""
    _, data, _ = page
    view = data["views"]["all"]
    table = leaderboard([golden_runs / "runs"], DEFAULT_BENCHMARK, ranks=True)
    for row in table.rows:
        found = table.row(row.label).ranks.get(AVG)
        shown = view["ranks"].get(row.label)
        assert (found is None) == (shown is None), row.label
        if found is not None:
            assert [shown[k] for k in ("rank", "lo", "hi", "group")] == [
                found.point,
                found.low,
                found.high,
                found.group,
            ]
    assert view["ranks"], "no row was ranked"
    assert all(r["label"] not in view["ranks"] for r in data["rows"] if r["quoted"])


def test_the_zero_shot_view_leaves_out_undeclared_rows(page):
    _, data, _ = page
    view = data["views"]["zero_shot"]
    # MiniLM as it is declares no training data: no task is known zero-shot for it.
    assert not any(label.startswith("golden/MiniLM [") for label in view["computed"])
    assert "STS16" not in view["tasks"] and "BIOSSES" in view["tasks"]
    assert any("Left out of this view" in note for note in view["notes"])


def test_embedded_text_cannot_end_the_script():
    data = {"benchmark": "x</script><script>alert(1)</script>", "rows": [], "note": "@@SCRIPT@@"}
    text = to_html(data)
    assert text.count("</script>") == 2
    body = re.search(r'id="page-data">(.*?)</script>', text, re.S).group(1)
    assert json.loads(body) == data


def test_page_data_has_no_intervals_without_units(tmp_path):
    """Results saved without per-item units: the page is still written, without ± or pairs."""
    import mteb
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    from neobench.protocol.tasks import load_benchmark, select_tasks

    tasks = select_tasks(load_benchmark(DEFAULT_BENCHMARK), ["STSBenchmark", "BIOSSES"])
    for name, score in (("org/a", 0.5), ("org/b", 0.6)):
        meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
        for task in tasks:
            scores = {s: {sub: {"main_score": score} for sub in task.hf_subsets}
                      for s in task.eval_splits}  # fmt: skip
            result = TaskResult.from_task_results(task, scores, evaluation_time=0.0)
            mteb.ResultCache(tmp_path).save_to_cache(result, meta)
    data = page_data([tmp_path], DEFAULT_BENCHMARK)
    assert data["intervals"] is False
    view = data["views"]["all"]
    assert all("refused" in p for p in view["pairs"].values())
    assert all("lo" not in c for r in view["rows"].values() for c in r["cells"].values())


def test_the_ab_command_is_quoted_for_a_shell_and_names_the_results(tmp_path, request, capsys):
    """A name with a quote (o'brien) gives a command that a POSIX shell splits into the right
    arguments, with --results of the folder the page was made from; as the page shows it."""
    import shlex

    import mteb
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    from neobench.cli.main import main
    from neobench.protocol.tasks import load_benchmark, select_tasks

    [task] = select_tasks(load_benchmark(DEFAULT_BENCHMARK), ["BIOSSES"])
    scores = {s: {sub: {"main_score": 0.5} for sub in task.hf_subsets} for s in task.eval_splits}
    names = ["o'brien/model", "org/b c"]
    for name in names:
        meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
        result = TaskResult.from_task_results(task, scores, evaluation_time=0.0)
        mteb.ResultCache(tmp_path / "runs").save_to_cache(result, meta)
    data = page_data([tmp_path / "runs"], DEFAULT_BENCHMARK)
    shell = {row["label"]: row["shell"] for row in data["rows"]}
    line = f"{data['compare_command']} --baseline {shell[names[0]]} --models {shell[names[1]]}"
    argv = ["neobench", "compare", "--results", str((tmp_path / "runs").resolve()),
            "--baseline", names[0], "--models", names[1]]  # fmt: skip
    assert shlex.split(line) == argv
    # The command runs: both names are found (compare then wants units these results lack).
    assert main(argv[1:]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no per-item predictions" in err and "Unknown model" not in err

    # What the page shows is that command (its script puts the pieces together).
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    chrome = request.getfixturevalue("browser")
    out = tmp_path / "page.html"
    out.write_text(to_html(data), encoding="utf-8")
    chrome.get(out.as_uri())
    Select(chrome.find_element(By.ID, "ab-a")).select_by_value(names[0])
    Select(chrome.find_element(By.ID, "ab-b")).select_by_value(names[1])
    shown = chrome.find_element(By.CSS_SELECTOR, "#ab-command code").text
    assert shlex.split(shown) == argv
    assert errors(chrome) == []


# ------------------------------------------------------------------------ in a real browser


def test_the_page_in_a_browser(page, browser, tmp_path, capsys):
    """From file://: no console error and no request; sort by Avg. (click, then Enter on the
    keyboard), filter to STS, open a drill-down, pick A/B and read compare's delta; the view
    in the URL reopens as it was; screenshots at 1,400 and 400 px."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    started = time.monotonic()
    out, data, written = page
    chrome = browser
    width(chrome, 1400)
    chrome.get(out.as_uri())
    assert errors(chrome) == []
    assert chrome.execute_script("return performance.getEntriesByType('resource').length") == 0
    view = data["views"]["all"]
    avg = {r["label"]: view["rows"][r["label"]]["cells"][AVG].get("v") for r in data["rows"]}
    shots = [shoot(chrome, tmp_path, "table-1400px")]

    # Sort by Avg.: a click sorts high to low, Enter on the focused header reverses it.
    header = chrome.find_element(By.CSS_SELECTOR, 'button[data-key="sort:Avg."]')
    header.click()
    assert [avg[label] for label in rows(chrome)] == sorted(avg.values(), reverse=True)
    assert "sort=Avg." in chrome.execute_script("return location.hash")
    focused = chrome.switch_to.active_element
    assert focused.get_attribute("data-key") == "sort:Avg."  # focus kept across the re-render
    focused.send_keys(Keys.ENTER)
    assert [avg[label] for label in rows(chrome)] == sorted(avg.values())
    th = chrome.find_element(By.CSS_SELECTOR, 'button[data-key="sort:Avg."]').find_element(
        By.XPATH, ".."
    )
    assert th.get_attribute("aria-sort") == "ascending"

    # Filter to STS: the STS column and its tasks held by a row, Avg.; nothing of other types.
    Select(chrome.find_element(By.ID, "f-type")).select_by_value("STS")
    heads = [th.text for th in chrome.find_elements(By.CSS_SELECTOR, "#board thead th")]
    assert heads[:4] == ["Model", "Rank", "Group", "STS (10)"] and "BIOSSES" in heads[4]
    assert not any(h.startswith("Class.") for h in heads)
    assert "type=STS" in chrome.execute_script("return location.hash")

    # The view as CSV: the rows shown, the STS columns with their intervals.
    chrome.execute_cdp_cmd("Browser.setDownloadBehavior",
                           {"behavior": "allow", "downloadPath": str(tmp_path)})  # fmt: skip
    chrome.find_element(By.ID, "dl-csv").click()
    csv_path = tmp_path / "leaderboard.csv"
    deadline = time.monotonic() + 10
    while not csv_path.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = csv_path.read_text().splitlines()
    assert lines[1].startswith(
        "model,quoted,rank,rank_ci_low,rank_ci_high,group,STS,STS_ci_low,STS_ci_high,STS_mark,BIOSSES"
    )
    assert len(lines) == 2 + len(data["rows"])

    # A score's provenance, on click: model, revision, recipe, instructions, mteb...
    key = f"cell:{written['baseline']}:STS"
    chrome.find_element(By.CSS_SELECTOR, f'button[data-key="{key}"]').click()
    shown = chrome.find_element(By.ID, "prov").text
    for word in ("model", "recipe", "instructions", "dtype", "max length", "mteb", "evaluated"):
        assert word in shown, word
    chrome.find_element(By.ID, "prov-close").click()

    # The drill-down of the row of seed replicates: each task with its interval, a dot per seed.
    seeded = next(r["label"] for r in data["rows"] if "(2 seeds)" in r["label"])
    chrome.find_element(By.CSS_SELECTOR, f'button[data-key="drill:{seeded}"]').click()
    detail = chrome.find_element(By.CSS_SELECTOR, "tr.detail")
    lines = detail.find_elements(By.CSS_SELECTOR, ".detail-table tbody tr")
    assert [line.find_element(By.TAG_NAME, "th").text for line in lines] == ["BIOSSES", "STS16"]
    assert len(detail.find_elements(By.CSS_SELECTOR, "circle.seed")) == 2 * len(lines)

    # A/B: the baseline against the fine-tune; the page's delta is compare --out's.
    tuned = next(r["label"] for r in written["rows"] if "MiniLM-ft" in r["label"])
    Select(chrome.find_element(By.ID, "ab-a")).select_by_value(written["baseline"])
    Select(chrome.find_element(By.ID, "ab-b")).select_by_value(tuned)
    expected = next(r for r in written["rows"] if r["label"] == tuned and r["task"] == "STS16")
    cell = chrome.find_element(By.CSS_SELECTOR, '#ab-table tr[data-task="STS16"] td.delta')
    assert cell.text.split(" ")[0] == f"{100 * expected['delta']:+.1f}"
    assert float(cell.get_attribute("data-delta")) == round(expected["delta"], 6)
    shots.append(shoot(chrome, tmp_path, "sts-drilldown-ab-1400px"))

    # Zero-shot only: the view without the rows whose training is not declared, nor the paper's.
    chrome.find_element(By.ID, "f-zs").click()
    assert set(rows(chrome)) == set(data["views"]["zero_shot"]["computed"])
    assert "STS16" not in [th.text for th in chrome.find_elements(By.CSS_SELECTOR, "#board th")]
    chrome.find_element(By.ID, "f-zs").click()

    # The address reopens the same view; then the phone width.
    again = chrome.execute_script("return location.href")
    chrome.get("about:blank")
    chrome.get(again)
    assert Select(chrome.find_element(By.ID, "f-type")).first_selected_option.text.startswith("STS")
    assert chrome.find_elements(By.CSS_SELECTOR, "tr.detail")
    width(chrome, 400)
    chrome.get(out.as_uri())
    shots.append(shoot(chrome, tmp_path, "table-400px"))
    chrome.get(again)
    shots.append(shoot(chrome, tmp_path, "sts-drilldown-ab-400px"))
    overflow = chrome.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0  # wide tables scroll inside their box, the page itself does not
    assert errors(chrome) == []
    with capsys.disabled():
        print(f"\nleaderboard page screenshots ({time.monotonic() - started:.0f} s): "
              + ", ".join(str(SHOTS / p.name) for p in shots))  # fmt: skip

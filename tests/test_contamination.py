"""Measured contamination (`neobench overlap`): the sample manifest's real training pairs against
the mirror's real MTEB tasks. STS-B was built from the STS 2012-2016 sets, so its training pairs
occur in STS12-STS16 and the overlap must be found; Banking77Classification shares nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED, cli
from scipy.stats import spearmanr

from neobench.core.errors import NeobenchError
from neobench.evaluation import units as units_mod
from neobench.protocol import contamination
from neobench.protocol.contamination import TrainingTexts, normalize
from neobench.report.columns import AVG
from neobench.report.contamination import overlap_report
from neobench.report.leaderboard import leaderboard

pytestmark = pytest.mark.slow

FINETUNE = SHARED / "data" / "finetune"
STS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"]
NONE = "Banking77Classification"


def test_texts_compare_without_case_whitespace_and_punctuation_and_near_duplicates_are_found():
    assert normalize("  A man, is PLAYING\tthe guitar! ") == normalize(
        "a man is playing the guitar"
    )
    training = TrainingTexts([("A man is playing a large flute.", "A man plays the flute.")])
    assert training.exact("a man is playing a LARGE flute")
    assert training.pair("A man plays the flute", "A man is playing a large flute.")
    assert not training.pair("A man plays the flute", "Someone else")
    assert training.near("A man is playing a large flute!!")  # an exact match is near too
    assert training.near("A man is playing a large flutes.")  # one letter more
    assert not training.near("A woman is slicing an onion.")


@pytest.fixture(scope="module")
def measured(mirror):
    return overlap_report("sample-local", tasks=[*STS, NONE], data_dir=str(mirror),
                          train_data_dir=str(FINETUNE))  # fmt: skip


def _stsb_training_pairs() -> set[frozenset[str]]:
    """The STSB row of the sample manifest, read here without neobench: the train pairs scored
    4.0 or more (its filter), normalised."""
    frame = pd.read_parquet(FINETUNE / "stsbenchmark_train.parquet")
    kept = frame[frame["score"] >= 4.0]
    return {
        frozenset((normalize(a), normalize(b)))
        for a, b in zip(kept.sentence1, kept.sentence2, strict=True)
    }


def test_the_sts_overlap_is_found_and_banking77_has_none(measured, mirror):
    found = {m.task: m for m in measured.measured}
    assert found[NONE].exact_units == found[NONE].near_units == found[NONE].exact_texts == 0
    assert found[NONE].units == 3080
    for task in STS[:5]:  # STS-B's train pairs come from these sets
        assert found[task].exact_units > 50, task
        assert found[task].near_units >= found[task].exact_units
        assert found[task].near_texts >= found[task].exact_texts > found[task].exact_units
    # Counted independently for STS12: its test pairs that are one of STSB's training pairs
    # (no other row of the manifest holds STS pairs), from the mirror's parquet files.
    stsb = _stsb_training_pairs()
    test = pd.read_parquet(next((mirror / "mteb" / "sts12-sts").rglob("test*.parquet")))
    pairs = [
        frozenset((normalize(a), normalize(b)))
        for a, b in zip(test.sentence1, test.sentence2, strict=True)
    ]
    assert found["STS12"].units == len(pairs) == 3108
    assert found["STS12"].exact_units == sum(p in stsb for p in pairs)
    ids = found["STS12"].contaminated["default/test"]
    assert ids == [str(i) for i, p in enumerate(pairs) if p in stsb]


def test_measurements_are_cached_per_manifest_and_task(measured, mirror):
    again = overlap_report("sample-local", tasks=["STS12", NONE], data_dir=str(mirror),
                           train_data_dir=str(FINETUNE))  # fmt: skip
    assert set(again.cached) == {"STS12", NONE}
    assert [m.summary for m in again.measured] == [
        m.summary for m in measured.measured if m.task in ("STS12", NONE)
    ]
    digest = contamination.manifest_digest(measured_manifest(), FINETUNE)
    assert contamination.cache_path(digest, "STS12").is_file()


def measured_manifest():
    from neobench.protocol.manifest import load_manifest

    return load_manifest("sample-local").path


def test_a_decontaminated_score_is_the_score_of_the_units_left(golden_runs, mirror):
    found = overlap_report(
        "sample-local", tasks=["STS16"], data_dir=str(mirror), train_data_dir=str(FINETUNE),
        results=[str(golden_runs / "runs")], models=["golden/MiniLM"], decontaminated=True,
    )  # fmt: skip
    [scored] = found.scores
    [sts16] = found.measured
    dropped = set(sts16.contaminated["default/test"])
    assert scored.units == 1186 and scored.kept == 1186 - len(dropped) > 1000
    root = golden_runs / "runs" / "results" / "golden__MiniLM"
    units_file = next(root.rglob("STS16.units.json"))
    units = units_mod.read(units_file)
    [part] = units.parts
    keep = [i for i, unit in enumerate(part.ids) if unit not in dropped]
    expected = spearmanr(part.data["gold"][keep], part.data["pred"][keep])[0]
    assert scored.score == pytest.approx(100 * expected, abs=1e-9)
    assert scored.low < scored.score < scored.high
    assert scored.full != pytest.approx(scored.score, abs=1e-6)


def test_the_command_writes_its_json_and_refuses_decontamination_without_runs(
    mirror, tmp_path, capsys
):
    out = tmp_path / "overlap.json"
    cli("overlap", "--manifest", "sample-local", "--tasks", f"STS16,{NONE}", "--data-dir", mirror,
        "--train-data-dir", FINETUNE, "--json", out)  # fmt: skip
    body = json.loads(out.read_text())
    shares = {t["task"]: t["shares"] for t in body["tasks"]}
    assert shares[NONE]["exact_units"] == 0 and shares["STS16"]["exact_units"] > 0
    assert "STS16" in capsys.readouterr().out
    with pytest.raises(NeobenchError, match="--decontaminated scores runs: give their results"):
        overlap_report("sample-local", tasks=["STS16"], decontaminated=True)
    assert np.isfinite(shares["STS16"]["near_texts"])


def test_a_fine_tune_s_run_card_records_what_was_measured_for_its_manifest(
    measured, minilm, mirror, tmp_path
):
    import yaml

    out = tmp_path / "tuned"
    cli("finetune", "--model", minilm, "--output", out, "--data-dir", FINETUNE, "--device", "cpu",
        "manifest=sample-local", "datasets=STSB", "max_seq_length=64", "max_steps=2",
        "batch_size=8", "checkpoint_every=100")  # fmt: skip
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    recorded = card["contamination"]
    assert set(recorded) >= {*STS, NONE}
    found = {m.task: m.summary for m in measured.measured}
    assert recorded["STS12"] == pytest.approx(found["STS12"])
    assert recorded[NONE]["exact_units"] == 0
    # Evaluated, its row marks the contaminated task's cells (and the note gives the share).
    results = tmp_path / "res"
    cli("eval", "--model", out, "--tasks", "STS16", "--data-dir", mirror, "--results", results,
        "--device", "cpu", "--no-cache")  # fmt: skip
    table = leaderboard([results], "MTEB(eng, v1)")
    [row] = table.rows
    assert {"STS16", "STS", AVG} <= row.measured and "‡" in row.text("STS", 1.0)
    share = f"{recorded['STS16']['exact_units']:.1%}"
    assert any(f"measured overlap of its training data with the test units: STS16 {share}" in n
               for n in table.notes)  # fmt: skip

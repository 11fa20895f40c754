"""Train/eval overlap: a tiny fine-tune on STSBenchmark's train split declares it in mteb's
vocabulary, mteb reads it back from model_meta.json, tables and comparisons mark it."""

import json
import shutil

import pytest
from mteb.models import ModelMeta

from neobench.cli.main import main
from neobench.core import cards as record
from neobench.core.card_io import write_card
from neobench.core.errors import NeobenchError
from neobench.evaluation.runner import EvalConfig, run_eval
from neobench.protocol import overlap
from neobench.protocol.tasks import load_benchmark, select_tasks
from neobench.report.compare import compare
from neobench.report.leaderboard import leaderboard
from neobench.report.load import load
from neobench.train.finetune import FinetuneConfig, finetune

BENCHMARK = "MTEB(eng, v1)"
TASKS = ["STSBenchmark", "BIOSSES"]
# The manifest's in_domain of the STSBENCHMARK dataset (datasets_manifest/neobert-mteb.yaml).
STS_IN_DOMAIN = {"STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16"}
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# Model names (labels add the conditions); the base is evaluated from a folder of that name.
TUNED, BASE = "neobench/sts-tuned", "local/tiny-bert-base"


def _eval(model, root, mirror, **extra) -> None:
    summary = run_eval(
        EvalConfig(
            model=str(model),
            tasks=TASKS,
            instructions="none",
            max_seq_length="64",
            data_dir=str(mirror),
            results=str(root),
            device="cpu",
            no_cache=True,
            **extra,
        )
    )
    assert [o.status for o in summary.outcomes] == ["evaluated", "evaluated"]


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_bert, mirror):
    """A two-step fine-tune of the tiny BERT on STSBenchmark pairs, and the untuned tiny BERT
    (which declares nothing), both evaluated on STSBenchmark and BIOSSES."""
    work = tmp_path_factory.mktemp("overlap")
    tuned = work / "sts-tuned"
    overrides = ["datasets=STSBENCHMARK", "max_steps=2", "batch_size=8", "max_seq_length=64"]
    finetune(
        FinetuneConfig(
            model=str(tiny_bert),
            output=str(tuned),
            overrides=overrides,
            data_dir=str(mirror),
            device="cpu",
        )
    )
    root = work / "res"
    _eval(tuned, root, mirror)
    # A folder name of its own: the session's tiny BERT folder is numbered by tmp_path_factory.
    base = work / BASE.removeprefix("local/")
    shutil.copytree(tiny_bert, base)
    _eval(base, root, mirror)
    return tuned, root


@pytest.fixture(scope="module")
def runs(results):
    runs, problems, _ = load([results[1]], select_tasks(load_benchmark(BENCHMARK)))
    assert problems == []
    return {r.model: r for r in runs}


def _meta_path(root, model):
    return next((root / "results" / model).rglob("model_meta.json"))


def _meta_file(root, model) -> dict:
    return json.loads(_meta_path(root, model).read_text())


def test_the_finetuned_folder_and_its_results_declare_the_training_data(results):
    tuned, root = results
    card = record.finetuned_model(tuned)
    assert set(card.training_datasets) == STS_IN_DOMAIN
    assert card.adapted_from is None  # a local base folder has no mteb name
    declared = _meta_file(root, "neobench__sts-tuned")
    assert set(declared["training_datasets"]) == STS_IN_DOMAIN
    # mteb's own ModelMeta, read back from the results, draws its zero-shot conclusions.
    meta = ModelMeta.model_validate_json_resolved(
        _meta_path(root, "neobench__sts-tuned").read_text()
    )
    assert meta.is_zero_shot_on(["STSBenchmark"]) is False
    assert meta.is_zero_shot_on(["BIOSSES"]) is True
    assert meta.zero_shot_percentage(TASKS) == 50
    # A model mteb knows nothing about stays unknown, not zero-shot.
    assert _meta_file(root, "local__tiny-bert-base")["training_datasets"] is None


def test_runs_carry_what_mteb_computes(runs):
    tuned, base = runs[TUNED], runs[BASE]
    assert tuned.training_datasets >= STS_IN_DOMAIN
    assert "STSBenchmark.v2" in tuned.training_datasets  # mteb's similar tasks come along
    assert overlap.trained_on(tuned, TASKS) == ["STSBenchmark"]
    assert overlap.zero_shot_percentage(tuned, TASKS) == 50
    assert base.training_datasets is None
    assert overlap.trained_on(base, TASKS) is None
    assert overlap.zero_shot_percentage(base, TASKS) is None


def test_table_marks_in_domain_cells_and_shows_zero_shot(results):
    table = leaderboard([results[1]], BENCHMARK, per_task=True)
    header = table.header()
    rows = {
        r.label.split(" [")[0]: dict(zip(header, table.cells(r), strict=True)) for r in table.rows
    }
    tuned, base = rows[TUNED], rows[BASE]
    assert tuned["STSBenchmark"].endswith("†") and "†" not in tuned["BIOSSES"]
    assert "†" not in base["STSBenchmark"]
    names = [t.metadata.name for t in select_tasks(load_benchmark(BENCHMARK))]
    expected = ModelMeta.create_empty({"training_datasets": STS_IN_DOMAIN})
    assert tuned["Zero-shot"] == f"{expected.zero_shot_percentage(names)}%" == "89%"  # 6 of 56
    assert base["Zero-shot"] == "unknown"
    assert ": trained on STSBenchmark (also on STS12, STS13" in "\n".join(table.notes)
    # By type: the STS column averages STSBenchmark, so it carries the mark too.
    by_type = leaderboard([results[1]], BENCHMARK)
    tuned_row = next(r for r in by_type.rows if r.label.startswith(TUNED))
    assert "†" in by_type.cells(tuned_row)[by_type.header().index("STS (10)")]


def test_zero_shot_only_drops_the_tasks_a_row_trained_on(results, capsys):
    table = leaderboard([results[1]], BENCHMARK, per_task=True, zero_shot_only=True,
                        models=["neobench/sts-tuned"])  # fmt: skip
    # Per task, the columns are the tasks the row holds: of the 50 kept, BIOSSES alone.
    assert table.task_names == ["BIOSSES"]
    assert "the other 49 of the 50 tasks of MTEB(eng, v1) no row holds." in "\n".join(table.notes)
    (row,) = table.rows
    assert row.zero_shot == 100 and not row.in_domain
    note = next(n for n in table.notes if n.startswith("--zero-shot-only"))
    assert "6 task(s) dropped" in note and "remaining 50 tasks" in note
    assert f"STS12, STS13, STS14, STS15, STS16, STSBenchmark (trained on by {row.label})" in note
    code = main(["table", "--results", str(results[1]), "--zero-shot-only", "--format", "md"])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert f"--zero-shot-only: the training data of {BASE} [" in captured.err
    assert "is not declared" in captured.err


def test_compare_flags_in_domain_rows_and_honours_zero_shot_only(results, tmp_path):
    root = tmp_path / "res"  # a copy: the module's results stay as they are
    shutil.copytree(results[1], root)
    # A second declared model: a copy of the fine-tune's results under another name.
    shutil.copytree(
        root / "results" / "neobench__sts-tuned", root / "results" / "neobench__sts-copy"
    )
    for path in (root / "results" / "neobench__sts-copy").rglob("model_meta.json"):
        path.write_text(path.read_text().replace("neobench/sts-tuned", "neobench/sts-copy"))
    found = compare([str(root)], BASE, benchmark=BENCHMARK, tasks=TASKS,
                    models=["neobench/sts-tuned"], resamples=100)  # fmt: skip
    assert {r.identity["model"] for r in found.rows} == {TUNED}
    flags = {r.task: r.in_domain for r in found.rows}
    assert flags == {"STSBenchmark": True, "BIOSSES": False, "Avg.": True}
    with pytest.raises(
        NeobenchError, match=r"training data of local/tiny-bert-base \[.+\] is not declared"
    ):
        compare([str(root)], BASE, benchmark=BENCHMARK, tasks=TASKS,
                models=["neobench/sts-tuned"], resamples=100, zero_shot_only=True)  # fmt: skip
    kept = compare([str(root)], "neobench/sts-tuned", benchmark=BENCHMARK, tasks=TASKS,
                   models=["neobench/sts-copy"], resamples=100, zero_shot_only=True)  # fmt: skip
    assert [r.task for r in kept.rows] == ["BIOSSES", "Avg."]
    assert all(r.in_domain is False and r.delta == 0 for r in kept.rows)
    assert kept.notes[0].startswith("--zero-shot-only: 1 task(s) dropped")
    assert "STSBenchmark (trained on by neobench/sts-tuned [" in kept.notes[0]
    assert "neobench/sts-copy [" in kept.notes[0]


def test_registry_models_and_hub_bases_follow_mteb(tmp_path):
    # A model mteb's registry knows takes its training data; a fine-tune of a hub base names
    # it in adapted_from, through which mteb adds the base's own training data.
    known = overlap.meta_training(MINILM, None)
    assert "MSMARCO" in known["training_datasets"]
    assert overlap.meta_training("org/unknown-model", None) == {}
    data = {"STSBENCHMARK": {"in_domain": ["STSBenchmark"]}, "AGNEWS": {"in_domain": []}}
    trained, adapted = overlap.finetune_declaration(data, MINILM, "hub", str(tmp_path))
    assert (trained, adapted) == (["STSBenchmark"], MINILM)
    meta = tmp_path / "model_meta.json"
    meta.write_text(json.dumps({"training_datasets": trained, "adapted_from": adapted}))
    found = overlap.read_training(meta, "neobench/tuned")
    assert {"STSBenchmark", "MSMARCO", "NQ"} <= found
    # A results file written before the field was filled: mteb's registry entry for the name.
    meta.write_text(json.dumps({"name": MINILM, "training_datasets": None}))
    assert "MSMARCO" in overlap.read_training(meta, MINILM)
    assert overlap.read_training(meta, "org/unknown-model") is None


def test_a_card_written_before_the_declaration_still_declares(tmp_path):
    # Cards of earlier neobench versions record each dataset's in_domain, not the declaration.
    old = {
        "kind": "neobench finetune",
        "output_model": {"name": "neobench/old", "recipe_sha256": "ab" * 32},
        "data": {"STSBENCHMARK": {"in_domain": ["STSBenchmark", "STS12"]}, "AGNEWS": {}},
        "model": {"base": MINILM, "name": MINILM},
    }
    write_card(tmp_path / record.FINETUNE_CARD, old)
    assert record.finetuned_model(tmp_path).training_datasets is None  # AGNEWS: not recorded
    old["data"]["AGNEWS"] = {"in_domain": []}
    write_card(tmp_path / record.FINETUNE_CARD, old)
    model = record.finetuned_model(tmp_path)
    assert (model.training_datasets, model.adapted_from) == (["STS12", "STSBenchmark"], MINILM)
    # What the adapter gives mteb: through adapted_from, mteb adds the base's own training data.
    meta = ModelMeta.create_empty(overwrites=overlap.meta_training("neobench/old", model))
    assert {"STSBenchmark", "STS12", "MSMARCO", "NQ"} <= meta.get_training_datasets()

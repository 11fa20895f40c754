"""A study's GPU-hours before it starts (`study run --dry-run`): the shipped H100 figures, a
calibration given or kept in the known place, the arithmetic of each job's estimate, the warning of
a time limit below 1.5x its estimate, and a bad calibration refused with one clear message."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO

from neobench.cli.main import main
from neobench.models.flops import (
    RELEASED,
    TRAIN_FLOPS_FACTOR,
    non_embedding_parameters,
    weights_per_token,
)
from neobench.models.flops import text_flops as flops_of
from neobench.protocol.config import BENCH_GPU_SCHEMA
from neobench.protocol.tasks import CHARS_PER_TOKEN, retrieval_lengths, task_size
from neobench.study import estimate
from neobench.study.plan import build_plan

STUDIES = REPO / "studies"
CARD = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def empty_home(tmp_path, monkeypatch):
    """No calibration in the known place unless a test puts one there."""
    monkeypatch.setenv("NEOBENCH_CACHE", str(tmp_path / "home"))


def dry_run(capsys, study, *flags) -> tuple[int, str]:
    code = main(["study", "run", str(study), "--dry-run", *map(str, flags)])
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())  # undo rich's line wrapping
    assert "Traceback" not in text
    return code, text


def record(card: str, train: float, encode: float) -> dict:
    """A `bench gpu` record with one neobench train row and one unpadded encode row of BERT-base
    at the FLOP/s given (the rows' other keys as the command writes them)."""
    rows = {
        "train": [{"model": "bert-base", "trainer": "neobench", "tokens_per_s": 1.0,
                   "flops_per_s": train, "shape": "recipe"}],
        "encode": [{"model": "bert-base", "path": "unpadded", "tokens_per_s": 1.0,
                    "flops_per_s": encode}],
    }  # fmt: skip
    return {
        "schema": BENCH_GPU_SCHEMA,
        "device": {"type": "cuda", "name": card, "peak_flops": None},
        "settings": {"scale": {"shapes": "base"}},
        "sections": {name: {"status": "ok", "rows": found} for name, found in rows.items()},
    }


def test_table4_base_is_estimated_from_the_shipped_h100_figures(capsys, tmp_path):
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--output", tmp_path / "out")
    assert code == 0
    assert f"Estimated on one {CARD}, from the shipped H100 figures" in text
    for model in ("BERT-base", "RoBERTa-base", "DeBERTaV3-base", "NomicBERT-2048",
                  "ModernBERT-base", "NeoBERT"):  # fmt: skip
        assert f"{model}: " in text and "weights per token" in text
    assert "18 finetune jobs:" in text and "144 eval jobs:" in text
    assert "the time limits request 390.0" in text
    assert "warning:" not in text  # the shipped limits follow the estimates
    assert " estimate " in text  # the listing's column
    assert not (tmp_path / "out").exists()


def test_each_job_is_its_flops_over_the_calibrated_rate(tmp_path):
    """The hours printed are the recipe's training FLOPs and the shard's forward FLOPs over the
    calibration's FLOP/s, plus the job's start-up."""
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(record(CARD, train=2.0e14, encode=4.0e14)))
    calibration = estimate.load_calibration(str(path))
    assert calibration.source == str(path) and calibration.card == CARD
    plan = build_plan(STUDIES / "table4-base.yaml", str(tmp_path / "out"))
    found = estimate.estimate_plan(plan, calibration)
    config = RELEASED["google-bert/bert-base-uncased"]
    params, _ = weights_per_token(config)

    def flops(length: float) -> float:
        return flops_of(params, config, length)

    passages, queries = retrieval_lengths("MSMARCO")
    assert (round(queries.mean, 1), round(passages.mean, 1)) == (33.3, 335.8)
    query, passage = queries.mean / CHARS_PER_TOKEN + 2, passages.mean / CHARS_PER_TOKEN + 2
    step = 128 * (flops(query) + 8 * flops(passage))  # the recipe: 128 queries, 7 negatives
    startup = plan.study.slurm.startup_s / 3600
    tune = plan.job("finetune/BERT-base-seed0")
    assert found.hours[tune.key] == pytest.approx(
        TRAIN_FLOPS_FACTOR * 2000 * step / 2.0e14 / 3600 + startup
    )
    shard = plan.job("eval/BERT-base-seed0/8of8")
    forward = 0.0
    for name in shard.tasks:
        chars, texts = task_size(plan.tasks[name])
        forward += texts * flops(min(chars / texts / CHARS_PER_TOKEN + 2, 512))
    assert found.hours[shard.key] == pytest.approx(forward / 4.0e14 / 3600 + startup)
    # A model of another type than the calibrated one: the median of the calibrated rates.
    assert "the median rate of bert-base" in found.models["NeoBERT"]


def shapes() -> dict[str, dict]:
    """The released checkpoints' shapes and bench gpu's tiny ones."""
    from neobench.bench.gpu import SHAPES

    return {**RELEASED, **{f"tiny {name}": shape for name, shape in SHAPES["tiny"].items()}}


@pytest.mark.parametrize("name", list(shapes()))
def test_weights_per_token_are_the_built_networks(name):
    """The dry run counts weights from a config's shapes (no torch); each layout's count is the
    built network's non-embedding parameters (on torch's meta device: shapes only), and the
    attention term reads the fields as the built config's attributes."""
    import torch
    from transformers import AutoConfig, AutoModel

    from neobench.models import register

    register()
    fields = shapes()[name]
    count, known = weights_per_token(fields)
    rest = {k: v for k, v in fields.items() if k != "model_type"}
    config = AutoConfig.for_model(fields["model_type"], **rest)
    with torch.device("meta"):
        network = AutoModel.from_config(config)
    assert known and count == non_embedding_parameters(network)
    assert flops_of(count, fields, 300) == pytest.approx(flops_of(count, config, 300))


def test_the_known_place_and_a_short_limit_warn(capsys, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "calibration").mkdir(parents=True)
    (home / "calibration" / "card.json").write_text(json.dumps(record("Some GPU", 1e13, 1e14)))
    data = yaml.safe_load((STUDIES / "table4-base.yaml").read_text())
    data["slurm"]["finetune"]["time"] = "1:00:00"
    study = tmp_path / "short.yaml"
    study.write_text(yaml.safe_dump(data))
    code, text = dry_run(capsys, study, "--output", tmp_path / "out")
    assert code == 0
    assert "Estimated on one Some GPU, from" in text and "(the known place)" in text
    assert "warning: finetune jobs of BERT-base: the time limit 1:00:00 is below 1.5x" in text
    assert "raise slurm.finetune.time to" in text
    assert "warning: eval jobs" not in text


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "no such file"),
        ("{not json", "unreadable"),
        (json.dumps({"schema": "other"}), "not a `neobench bench gpu` JSON"),
        (json.dumps({**record(CARD, 1e14, 1e14), "sections": {}}), "no rows to estimate"),
    ],
)
def test_a_bad_calibration_is_one_clear_error(capsys, tmp_path, content, said):
    path = tmp_path / "calibration.json"
    if content is not None:
        path.write_text(content)
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--calibration", path,
                         "--output", tmp_path / "out")  # fmt: skip
    assert code == 2 and said in text and str(path) in text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"sections": "oops"}, 'sections is a string ("oops"), not an object'),
        ({"device": "H100"}, 'device is a string ("H100"), not an object'),
        ({"sections": {"train": "x"}}, 'sections.train is a string ("x"), not an object'),
        ({"sections": {"train": {"rows": {}}}}, "sections.train.rows is an object ({}), not a"),
    ],
)
def test_a_calibration_with_a_wrong_typed_field_names_it(capsys, tmp_path, edit, said):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({**record(CARD, 1e14, 1e14), **edit}))
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--calibration", path,
                         "--output", tmp_path / "out")  # fmt: skip
    assert code == 2 and said in text and str(path) in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()


def test_every_wrong_typed_field_is_named_at_once(capsys, tmp_path):
    good = record(CARD, 1e14, 1e14)
    row = dict(good["sections"]["train"]["rows"][0], tokens_per_s="fast")
    bad = {**good, "device": 3, "sections": {**good["sections"], "train": {"rows": [row]}}}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(bad))
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--calibration", path,
                         "--output", tmp_path / "out")  # fmt: skip
    assert code == 2
    assert "device is a number (3), not an object" in text
    assert 'sections.train.rows[0].tokens_per_s is a string ("fast"), not a number' in text


def test_records_of_two_cards_and_an_empty_folder_are_refused(capsys, tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--calibration", folder,
                         "--output", tmp_path / "out")  # fmt: skip
    assert code == 2 and "the folder holds no JSON record" in text
    (folder / "a.json").write_text(json.dumps(record("Card A", 1e14, 1e14)))
    (folder / "b.json").write_text(json.dumps(record("Card B", 1e14, 1e14)))
    code, text = dry_run(capsys, STUDIES / "table4-base.yaml", "--calibration", folder,
                         "--output", tmp_path / "out")  # fmt: skip
    assert code == 2 and "records of 2 cards (Card A, Card B)" in text


def test_a_model_whose_shape_is_unknown_is_said_not_estimated(capsys, tmp_path):
    data = yaml.safe_load((STUDIES / "table4-base.yaml").read_text())
    data["models"] = [{"model": "some-lab/unreleased-encoder", "name": "Mine"}]
    data["baseline"] = "Mine"
    study = tmp_path / "mine.yaml"
    study.write_text(yaml.safe_dump(data))
    code, text = dry_run(capsys, study, "--output", tmp_path / "out")
    assert code == 0
    assert "Mine: not estimated: its config is not on this machine" in text
    assert "not estimated: Mine" in text

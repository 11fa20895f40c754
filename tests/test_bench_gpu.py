"""`neobench bench gpu`: every section's plumbing on the CPU (tiny shapes, a few real texts), the
JSON's keys, the skipped and not-applicable cases, bad flags; and, opt-in, the full run on CUDA."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import MIRROR

from neobench.bench.config import GPU_SECTIONS
from neobench.cli.main import main
from neobench.compat.patches import ENV

# The bench checks every claim of the GPU path, the unpadded patch among them (tests/conftest.py).
pytestmark = pytest.mark.patches

TOP = {"schema", "device", "settings", "texts", "sections", "seconds", "environment"}
DEVICE_CPU = {"type", "name", "peak_flops", "threads"}
SETTINGS = {
    "size", "device", "dtype", "models", "sections", "score_tasks", "data_dir", "seed",
    "budgets_s", "scale",
}  # fmt: skip
TEXTS = {"source", "tasks", "count", "tokens", "mean_tokens", "max_seq_length"}
SECTION = {"status", "reason", "budget_s", "seconds", "rows"}
# On a CPU without a budget the card's memory is None: no estimate (estimate_gib, estimate_error).
NEOBENCH_TRAIN = {"variant", "padding", "memory"}
ROWS = {
    "train": {
        "model", "trainer", "steps_timed", "tokens", "seconds", "tokens_per_s", "peak_memory_mb",
        "first_loss", "final_loss", "loss_finite", "precision", "error", "shape",
        "queries_per_step", "negatives", "max_length", "mean_tokens", "flops_per_s",
        "peak_fraction",
    },
    "corpus": {
        "model", "attention", "texts", "tokens", "mean_tokens", "seconds", "tokens_per_s",
        "flops_per_s", "peak_fraction", "forward_share", "host_share", "peak_memory_mb",
        "ranked", "listed", "expected_listed", "corpora", "documents", "queries", "v1_minutes",
    },
    "encode": {
        "model", "path", "attention", "texts", "tokens", "seconds", "tokens_per_s",
        "peak_fraction", "peak_memory_mb",
    },
    "unpadded": {
        "model", "architecture", "dtype", "max_abs_diff", "max_abs_value", "min_cosine",
        "stock_max_abs_diff", "cosine_floor", "within",
    },
    "scores": {
        "task", "model", "device_score", "cpu_float32_score", "abs_diff", "tolerance", "within",
    },
    "topk": {
        "queries", "docs", "dim", "k", "device_seconds", "cpu_seconds", "identical",
        "near_ties", "differing", "max_score_diff", "tie_tolerance",
    },
}  # fmt: skip
MODELS = ["bert-base", "neobert"]  # one packed by neobench/models/unpad.py, one native


def run(*argv: str, out: Path | None = None) -> tuple[int, dict]:
    """`bench gpu` with ``argv``: its exit code and record (written to ``out``, else a temporary
    file)."""
    import tempfile

    out = out or Path(tempfile.mkdtemp(prefix="bench-gpu-")) / "gpu.json"
    code = main(["bench", "gpu", *argv, "--json", str(out)])
    return code, (json.loads(out.read_text()) if out.is_file() else {})


@pytest.fixture(scope="module")
def quick(tmp_path_factory, mirror):
    """Every section on the CPU at --size tiny, half-precision autocast, BIOSSES' real texts."""
    folder = tmp_path_factory.mktemp("bench-gpu")
    with pytest.MonkeyPatch.context() as patched:  # the unpadded path is one of its claims
        patched.delenv(ENV, raising=False)
        code = main([
            "bench", "gpu", "--device", "cpu", "--size", "tiny", "--dtype", "float16",
            "--models", ",".join(MODELS), "--score-tasks", "BIOSSES", "--data-dir", str(mirror),
            "--json", str(folder / "gpu.json"), "--markdown", str(folder / "gpu.md"),
        ])  # fmt: skip
    return code, json.loads((folder / "gpu.json").read_text()), (folder / "gpu.md").read_text()


def test_every_section_runs_and_passes_on_cpu(quick):
    code, record, _ = quick
    assert code == 0
    assert list(record["sections"]) == list(GPU_SECTIONS)
    # A tiny run exercises every path whatever the CPU's load: no section is cut short.
    assert record["settings"]["budgets_s"] is None
    assert all(s["budget_s"] is None for s in record["sections"].values())
    assert {n: s["status"] for n, s in record["sections"].items()} == dict.fromkeys(
        GPU_SECTIONS, "ok"
    )


def test_json_keys_are_the_documented_ones(quick):
    _, record, _ = quick
    assert set(record) == TOP and record["schema"] == "neobench-bench-gpu/1"
    assert set(record["device"]) == DEVICE_CPU and record["device"]["peak_flops"] is None
    assert set(record["settings"]) == SETTINGS and set(record["texts"]) == TEXTS
    for name, section in record["sections"].items():
        assert set(section) == SECTION, name
        assert section["rows"], name
        for row in section["rows"]:
            # neobench's train rows add how they ran (the run card's padding and memory).
            extra = NEOBENCH_TRAIN if name == "train" and row["trainer"] == "neobench" else set()
            assert set(row) == ROWS[name] | extra, name


def test_figures_are_measured_on_the_models_and_texts_asked_for(quick):
    _, record, _ = quick
    sections = record["sections"]
    assert record["texts"]["source"] == "mirror" and record["texts"]["tasks"] == ["BIOSSES"]
    assert record["texts"]["tokens"] > record["texts"]["count"] > 0
    train = sections["train"]["rows"]
    assert [(r["model"], r["trainer"], r.get("variant")) for r in train] == [
        (m, t, v) for m in MODELS
        for t, v in (("neobench", "packed"), ("neobench", "padded"), ("neobench", "chunked"),
                     ("stock", None))
    ]  # fmt: skip
    # neobench's rows say how they ran: packed or padded, and the chunked row at every step.
    for row in train:
        if row["trainer"] == "neobench":
            wanted = "padded" if row["variant"] == "padded" else "packed"
            assert row["padding"]["requested"] == wanted, row
    # The three ways are one method: the same losses.
    same = {r.get("variant"): r["final_loss"] for r in train if r["model"] == MODELS[0]}
    assert max(abs(same["packed"] - same[v]) for v in ("padded", "chunked")) < 1e-4
    for row in train:
        assert row["steps_timed"] == 2 and row["tokens_per_s"] > 0 and row["peak_memory_mb"] > 0
        assert row["loss_finite"] and math.isfinite(row["final_loss"])
        assert row["precision"] == "float32"  # the recipe's bf16 is for CUDA only
        # The recipe's step shape at tiny size: 8 queries, each with a positive and 2 negatives.
        assert (row["shape"], row["queries_per_step"], row["negatives"]) == ("recipe", 8, 2)
        assert 1 < row["mean_tokens"] <= row["max_length"] == 32
        assert row["flops_per_s"] > 0 and row["peak_fraction"] is None  # no peak for a CPU
    corpus = sections["corpus"]["rows"]
    assert [r["model"] for r in corpus] == MODELS
    for row in corpus:
        assert (row["documents"], row["queries"]) == (1_000, 40)
        assert sum(c["documents"] for c in row["corpora"].values()) == 1_000
        assert row["ranked"] == 40 and row["listed"] == row["expected_listed"] == 40 * 100
        # Every distinct text through the network once (queries, and a corpus of about
        # 1,000 distinct documents: a generated one may repeat), cache off.
        assert 1_000 < row["texts"] <= 1_040 and row["tokens"] > row["texts"]
        assert 0 < row["forward_share"] <= 1 and row["host_share"] == pytest.approx(
            1 - row["forward_share"], abs=1e-4
        )
        assert row["v1_minutes"] > 0 and row["flops_per_s"] > 0
    encode = sections["encode"]["rows"]
    assert [(r["model"], r["path"]) for r in encode] == [
        (m, p) for m in MODELS for p in ("padded", "unpadded", "stock")
    ]
    assert all(r["tokens"] == record["texts"]["tokens"] and r["tokens_per_s"] > 0 for r in encode)
    assert all(r["peak_fraction"] is None for r in encode)  # no nominal peak for a CPU
    assert all("varlen" in r["attention"] for r in encode if r["path"] == "unpadded")
    unpadded = {r["model"]: r for r in sections["unpadded"]["rows"]}
    assert set(unpadded) == set(MODELS)
    assert all(
        0 <= r["max_abs_diff"] < r["max_abs_value"] and r["within"] for r in unpadded.values()
    )
    (score,) = sections["scores"]["rows"]
    assert score["task"] == "BIOSSES" and score["within"]
    assert 0 < score["device_score"] < 1 and 0 < score["cpu_float32_score"] < 1
    assert score["abs_diff"] == pytest.approx(
        abs(score["device_score"] - score["cpu_float32_score"])
    )
    (topk,) = sections["topk"]["rows"]
    assert topk["identical"] + topk["near_ties"] == topk["queries"] and topk["differing"] == 0


def test_markdown_has_one_line_per_row_and_every_status(quick):
    _, record, table = quick
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + sum(len(s["rows"]) for s in record["sections"].values())
    for name in GPU_SECTIONS:
        assert f"- {name}: ok" in table
    assert "FAIL" not in table and "the mirror's BIOSSES" in table


def test_the_record_calibrates_a_study_estimate(quick, capsys, tmp_path):
    """The JSON `bench gpu` writes is what `study run --dry-run --calibration` reads: its
    recipe-shape train rows and corpus rows, matched by model type (tiny-bert: a BERT)."""
    from conftest import REPO

    _, record, _ = quick
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(record))
    code = main(["study", "run", str(REPO / "studies/tiny.yaml"), "--dry-run",
                 "--calibration", str(path), "--output", str(tmp_path / "out")])  # fmt: skip
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert code == 0 and f"Estimated on one cpu, from {path}:" in text
    assert "the rate of bert-base's recipe-shape train rows" in text
    assert "the rate of bert-base's corpus rows" in text
    assert "2 finetune jobs:" in text and "in all:" in text


def test_scores_are_skipped_without_data_and_not_applicable_in_cpu_float32(mirror):
    code, record = run("--device", "cpu", "--size", "tiny", "--sections", "scores")
    scores = record["sections"]["scores"]
    assert code == 0 and scores["status"] == "skipped" and "--data-dir" in scores["reason"]
    assert scores["rows"] == [] and record["texts"] is None  # no section that needed texts ran
    others = [s for n, s in record["sections"].items() if n != "scores"]
    assert all(s["status"] == "skipped" and s["reason"] == "not in --sections" for s in others)
    code, record = run("--device", "cpu", "--size", "tiny", "--sections", "scores",
                       "--data-dir", str(mirror))  # fmt: skip
    scores = record["sections"]["scores"]
    assert code == 0 and scores["status"] == "not applicable" and "float16" in scores["reason"]


def test_a_config_model_is_built_seeded_and_loads(tmp_path, minilm):
    """A study's config: entry and bench gpu's shapes share one builder (models/build.py)."""
    from conftest import REPO
    from safetensors.torch import load_file

    from neobench.models.load import load_model
    from neobench.study.models import ResolvedModel, build

    def built(name: str, seed: int) -> dict:
        entry = ResolvedModel(name, str(tmp_path / name), False, REPO / "studies/tiny-bert.json",
                              str(minilm), seed)  # fmt: skip
        assert build(entry) and not build(entry)  # built once; a second call finds the folder
        assert not (tmp_path / f"{name}.building").exists()
        return load_file(tmp_path / name / "model.safetensors")

    a, b, c = built("a", 0), built("b", 0), built("c", 1)
    assert all(torch.equal(a[k], b[k]) for k in a)  # same seed, same weights
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert load_model(str(tmp_path / "a")).architecture == "BertModel"


def test_a_spent_budget_marks_the_section_partial_and_starts_nothing():
    from neobench.bench.config import GPU_SCALES
    from neobench.bench.gpu import Budget, topk_section

    section = topk_section(GPU_SCALES["tiny"], "cpu", 0, Budget(0))
    assert section.status == "partial" and section.rows == []
    assert section.reason == "top-k: not started, the section's 0 s were spent"


def test_bad_values_are_named_at_once_without_a_traceback(capsys):
    code = main([
        "bench", "gpu", "--device", "cpu", "--size", "huge", "--sections", "trian,scores",
        "--models", "bert", "--dtype", "fp8", "--seed", "-1", "--score-tasks", "BIOSES",
    ])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    assert "--size value 'huge'" in err and "Valid: full, tiny" in err
    assert "--sections value 'trian'" in err and "Did you mean 'train'" in err
    assert "--models value 'bert'" in err and "bert-base" in err
    assert "--dtype value 'fp8'" in err
    assert "--seed -1" in err
    assert "BIOSES" in err and "BIOSSES" in err


@pytest.mark.gpu
def test_full_run_on_one_gpu():
    """Opt-in (-m gpu): the whole command at --size full within its budgets, or the record
    scripts/gpu-check.sh just wrote with it ($NEOBENCH_GPU_RECORD): every section it ran passed,
    the recipe-shape train rows, a corpus of a million documents, shares of the card's peak."""
    import os

    from neobench.bench.gpu import failed

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    kept = os.environ.get("NEOBENCH_GPU_RECORD")
    if kept:
        record = json.loads(Path(kept).read_text())
    else:
        _, record = run(*(["--data-dir", str(MIRROR)] if MIRROR.is_dir() else []))
    statuses = {n: s["status"] for n, s in record["sections"].items()}
    assert not failed(record), statuses
    assert record["device"]["type"] == "cuda" and record["seconds"] < 540
    assert {statuses[n] for n in ("train", "encode", "corpus")} <= {"ok", "partial"}
    train = record["sections"]["train"]["rows"]
    ran = [r for r in train if not r.get("out_of_memory")]  # the stock trainer may not fit
    assert all(r["precision"] == "bf16 autocast" and r["loss_finite"] for r in ran)
    assert all(r["shape"] == "recipe" and r["queries_per_step"] == 128 for r in train)
    # neobench never runs out of memory at the recipe's step, and its estimate is within 15%.
    ours = [r for r in train if r["trainer"] == "neobench"]
    assert ours and not any(r.get("out_of_memory") or r["error"] for r in ours)
    for row in ours:
        if row.get("estimate_error") is not None:
            assert abs(row["estimate_error"]) <= 0.15, row
    corpus = record["sections"]["corpus"]["rows"]
    assert corpus and all(r["documents"] >= 1_000_000 for r in corpus)
    if record["device"]["peak_flops"]:
        for name in ("encode", "corpus", "train"):
            rows = [r for r in record["sections"][name]["rows"] if not r.get("out_of_memory")]
            assert all(r["peak_fraction"] > 0 for r in rows), name


def test_flags_are_the_config_fields_and_their_defaults(capsys):
    from neobench.bench.config import BenchGpuCommand
    from neobench.cli.main import flags, parse_args

    args = parse_args(["bench", "gpu"])
    assert flags.config_from_args(BenchGpuCommand, args) == BenchGpuCommand()
    with pytest.raises(SystemExit):
        main(["bench", "gpu", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "neobench bench gpu" in text and "--score-tasks" in text and "(default full)" in text

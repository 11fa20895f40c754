"""The manifest data engine on small hub-shaped folders built here, and on the real samples."""

import pandas as pd
import pytest
from conftest import SHARED

from neobench.core.errors import NeobenchError
from neobench.protocol.data import build_dataset, extract
from neobench.protocol.manifest import Row, load_manifest


def test_column_expressions():
    record = {
        "set": {"query": "q", "pos": ["p1", "p2"], "neg": ["n1", "n2", "n3"]},
        "pos_paras": [{"text": "t1"}, {"text": "t2"}],
        "title": "T",
        "body": "B",
    }
    assert extract("set.query", record) == "q"
    assert extract("set.pos[0]", record) == "p1"
    assert extract("set.neg[*]", record) == ["n1", "n2", "n3"]
    assert extract("pos_paras[*].text", record) == ["t1", "t2"]
    assert extract("pos_paras[1].text", record) == "t2"
    assert extract("{title} {body}", record) == "T B"
    assert extract("set.pos[5]", record) is None


def hub_folder(root, repo, configs: dict[str, dict[str, pd.DataFrame]]):
    """A folder laid out like a hub dataset repo: README configs + one parquet per split."""
    folder = root / repo
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, frame in splits.items():
            path = f"{config}/{split}-00000-of-00001.parquet"
            (folder / config).mkdir(parents=True, exist_ok=True)
            frame.to_parquet(folder / path)
            lines += [f"  - split: {split}", f"    path: {path}"]
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]))


def row(**fields) -> Row:
    base = {"key": "X", "instruction": "FEVER", "licence": "test", "source": "neobench"}
    return Row(**{**base, **fields})


def test_beir_join_of_qrels_corpus_and_queries(tmp_path):
    hub_folder(
        tmp_path,
        "org/beir",
        {
            "default": {
                "train": pd.DataFrame(
                    {
                        "query-id": ["q1", "q2", "q3"],
                        "corpus-id": ["d2", "d1", "d9"],
                        "score": [1, 1, 1],
                    }
                )
            },
            "corpus": {
                "corpus": pd.DataFrame(
                    {
                        "_id": ["d1", "d2", "d3"],
                        "title": ["", "", ""],
                        "text": ["doc one", "doc two", "doc three"],
                    }
                )
            },
            "queries": {
                "queries": pd.DataFrame({"_id": ["q1", "q2"], "text": ["query one", "query two"]})
            },
        },
    )
    built = build_dataset(
        row(hf_id="org/beir", config="default", join="beir", query="text", positive="text"),
        tmp_path,
        max_negatives=7,
    )
    assert built.dataset.to_list() == [
        {"query": "query one", "positive": "doc two"},
        {"query": "query two", "positive": "doc one"},
    ]  # q3/d9 dangle


def test_parts_filters_derive_and_pairing(tmp_path):
    hub_folder(
        tmp_path,
        "org/mix",
        {
            "a": {"train": pd.DataFrame({"x1": ["a1", "a2"], "x2": ["b1", "b2"]})},
            "b": {"train": pd.DataFrame({"y1": ["c1"], "y2": ["d1"]})},
        },
    )
    parts = build_dataset(
        row(
            hf_id="org/mix",
            parts=[
                {"config": "a", "query": "x1", "positive": "x2"},
                {"config": "b", "query": "y1", "positive": "y2"},
            ],
        ),
        tmp_path,
        7,
    )
    assert parts.dataset["query"] == ["a1", "a2", "c1"] and parts.rows_raw == 3

    frame = pd.DataFrame(
        {
            "question": ["q1", "q2", "q3", "q4", "q5"],
            "opa": ["A"] * 5,
            "opb": ["B"] * 5,
            "cop": [0, 1, 0, 1, 0],
            "subject": ["s", "s", "s", "t", "u"],
        }
    )
    hub_folder(tmp_path, "org/mcq", {"default": {"train": frame}})
    clustered = row(
        hf_id="org/mcq",
        derive={"answer": {"pick": ["opa", "opb"], "by": "cop"}},
        query="{question} {answer}",
        positive="{question} {answer}",
        pair_by="subject",
    )
    paired = build_dataset(clustered, tmp_path, 7)
    records = paired.dataset.to_list()
    assert len(records) == 3  # groups t and u have a single member: no partner
    assert {r["query"] for r in records} == {"q1 A", "q2 B", "q3 A"}
    assert all(
        r["positive"] != r["query"] and r["positive"] in {"q1 A", "q2 B", "q3 A"} for r in records
    )
    assert build_dataset(clustered, tmp_path, 7).dataset.to_list() == records  # fixed seed


def test_negatives_are_capped_and_fixed_per_dataset(tmp_path):
    frame = pd.DataFrame(
        {
            "q": ["a", "b", "c"],
            "p": ["pa", "pb", "pc"],
            "negs": [["n1", "n2", "n3"], ["m1", "m2"], ["o1"]],
        }
    )
    hub_folder(tmp_path, "org/negs", {"default": {"train": frame}})
    built = build_dataset(
        row(hf_id="org/negs", query="q", positive="p", negatives=["negs[*]"], num_negatives=2),
        tmp_path,
        max_negatives=7,
    )
    assert built.num_negatives == 2
    assert built.dataset.column_names == ["query", "positive", "negative_1", "negative_2"]
    assert built.dataset["query"] == ["a", "b"]  # the row with one negative is dropped
    capped = build_dataset(
        row(hf_id="org/negs", query="q", positive="p", negatives=["negs[*]"], num_negatives=2),
        tmp_path,
        max_negatives=1,
    )
    assert capped.num_negatives == 1 and len(capped.dataset) == 3


def test_sample_manifest_builds_from_the_real_files():
    manifest = load_manifest("sample-local")
    data_dir = SHARED / "data" / "finetune"
    snli = build_dataset(manifest.rows["SNLI"], data_dir, 7)
    assert (
        snli.dataset.column_names == ["query", "positive", "negative_1"]
        and len(snli.dataset) == 6503
    )
    stsb = build_dataset(manifest.rows["STSB"], data_dir, 7)
    raw = pd.read_parquet(data_dir / "stsbenchmark_train.parquet")
    assert len(stsb.dataset) == int((raw["score"] >= 4).sum())  # the score >= 4 filter


def test_local_rows_need_a_data_dir():
    with pytest.raises(NeobenchError, match="pass --data-dir"):
        build_dataset(load_manifest("sample-local").rows["SNLI"], None, 7)

"""The library patches' registry (neobench/compat/patches.py): the gate, the switch, how a patch is
set and put back, and the scores of every task type the mirror holds with patches on and off."""

import ast
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import mteb
import pytest
import yaml
from datasets.arrow_dataset import Column
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from neobench.compat import patches
from neobench.core.errors import NeobenchError
from neobench.evaluation import units
from neobench.evaluation.runner import EvalConfig, run_eval

REPO = Path(__file__).resolve().parent.parent

# One task of each type the mirror holds (it has no reranking task), the smallest of its type.
EQUALITY_TASKS = [
    "SciFact",  # Retrieval: mteb-texts' corpus and queries, prediction-json
    "AmazonCounterfactualClassification",  # Classification: column-cache's undersampling
    "TwentyNewsgroupsClustering",  # Clustering
    "BIOSSES",  # STS
    "TwitterURLCorpus",  # PairClassification
    "SummEval",  # Summarization
]


def _first_sets(task) -> None:
    task.dataset["test"] = task.dataset["test"].select(range(2))  # 2 of 10 clustering sets


def _first_pairs(task) -> None:
    from datasets import Dataset

    (row,) = task.dataset["test"]  # one row of lists, one item per pair
    pairs = {k: v[:2000] if isinstance(v, list) else v for k, v in row.items()}
    task.dataset["test"] = Dataset.from_dict({k: [v] for k, v in pairs.items()})


# The two largest, cut after mteb loads them (the same cut in both runs): the whole sets would
# take minutes of MiniLM on a CPU and exercise no other code.
SHORTENED = {"TwentyNewsgroupsClustering": _first_sets, "TwitterURLCorpus": _first_pairs}


def cut_after_loading(monkeypatch, cuts: dict) -> None:
    """Each task of ``cuts`` (name -> cut) is cut right after mteb loads it, in every run."""
    for task in mteb.get_benchmark("MTEB(eng, v1)").tasks:  # the classes every run loads through
        if task.metadata.name in cuts:
            load, cut = type(task).load_data, cuts[task.metadata.name]

            def shortened(self, *args, load=load, cut=cut, **kwargs):
                load(self, *args, **kwargs)
                cut(self)

            monkeypatch.setattr(type(task), "load_data", shortened)


@pytest.fixture(autouse=True)
def _fresh_log(monkeypatch):
    """Each test sees the gate's log line as a new process would (it is logged once)."""
    monkeypatch.setattr(patches, "_logged", set())
    monkeypatch.delenv(patches.ENV, raising=False)


# --- the gate ------------------------------------------------------------------------------------


def test_on_the_tested_versions_every_patch_is_in_force():
    assert patches.untested() == []
    assert patches.enabled() == list(patches.PATCHES)


def as_if_installed(monkeypatch, library: str, version: str) -> None:
    """The gate sees ``library`` at ``version``; every other library as installed."""
    real = patches.installed
    monkeypatch.setattr(
        patches, "installed", lambda name: version if name == library else real(name)
    )


MTEB_PATCHES = [n for n, p in patches.PATCHES.items() if p.library == "mteb"]


def test_another_library_version_turns_its_patches_off_with_one_log_line_each(monkeypatch, caplog):
    as_if_installed(monkeypatch, "mteb", "2.99.0")  # as if mteb were a version not verified
    stock_iter = Column.__iter__
    with caplog.at_level(logging.INFO, logger=patches.__name__):
        # The datasets and transformers patches stay in force: only mteb's are off.
        assert patches.enabled() == [n for n in patches.PATCHES if n not in MTEB_PATCHES]
        assert not patches.on("prediction-json") and not patches.on("mteb-texts")
        with patches.applied("column-cache") as on:
            assert on is True and Column.__iter__ is not stock_iter
    lines = [r for r in caplog.records if r.name == patches.__name__]
    assert len(lines) == len(MTEB_PATCHES) and {r.levelno for r in lines} == {logging.WARNING}
    for name, line in zip(MTEB_PATCHES, lines, strict=True):
        verified = patches.PATCHES[name].verified
        assert line.getMessage() == (
            f"library patch {name} off: mteb 2.99.0 (verified: {verified}); it runs as "
            "shipped (slower, same scores)"
        )


def test_a_patch_is_in_force_on_every_version_of_its_range(monkeypatch):
    monkeypatch.setitem(
        patches.PATCHES,
        "column-cache",
        dataclasses.replace(patches.PATCHES["column-cache"], verified=">=5.2.0,<5.4"),
    )
    as_if_installed(monkeypatch, "datasets", "5.3.1")
    assert patches.on("column-cache")
    as_if_installed(monkeypatch, "datasets", "5.4.0")
    assert not patches.on("column-cache")
    assert patches.unverified("column-cache") == "datasets 5.4.0 (verified: >=5.2.0,<5.4)"


def test_neobench_patches_off_or_a_list_of_names(monkeypatch, caplog):
    names = list(patches.PATCHES)
    with caplog.at_level(logging.INFO, logger=patches.__name__):
        monkeypatch.setenv(patches.ENV, "off")
        assert patches.enabled() == []
        monkeypatch.setenv(patches.ENV, f"{names[0]}, {names[1]}")
        assert patches.enabled() == names[2:]
        monkeypatch.setenv(patches.ENV, "on")
        assert patches.enabled() == names
    lines = [r.getMessage() for r in caplog.records if r.name == patches.__name__]
    assert len(lines) == 2 and "NEOBENCH_PATCHES=off" in lines[0] and names[1] in lines[1]


def test_the_reason_patches_are_off_is_what_a_run_card_records(monkeypatch):
    assert patches.off_reason() is None
    monkeypatch.setenv(patches.ENV, "off")
    assert patches.off_reason() == {"why": "NEOBENCH_PATCHES=off"}
    monkeypatch.setenv(patches.ENV, "column-cache")
    assert patches.off_reason() == {"why": "NEOBENCH_PATCHES=column-cache"}
    monkeypatch.delenv(patches.ENV)
    as_if_installed(monkeypatch, "transformers", "0.0.1")
    verified = patches.PATCHES["unpadded-attention"].verified
    assert patches.off_reason() == {
        "why": "unverified library versions",
        "untested": [f"unpadded-attention: transformers 0.0.1 (verified: {verified})"],
    }


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_cli_says_patches_are_off_without_verbose(tmp_path, tiny_bert, mirror):
    argv = ["-m", "neobench", "eval", "--model", str(tiny_bert), "--tasks", "BIOSSES",
            "--instructions", "none", "--max-seq-length", "128", "--data-dir", str(mirror),
            "--results", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"),
            "--device", "cpu"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, *argv],
        env={**os.environ, patches.ENV: "off"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "library patches off" in line]
    assert said == ["warning: library patches off (NEOBENCH_PATCHES=off): the libraries run as "
                    "shipped"]  # fmt: skip


def test_the_api_is_silent_about_the_gate_until_logging_is_configured():
    # As an untested library version does: the gate logs a warning. A library without a handler
    # of its own would print it through Python's last-resort handler.
    code = (
        "import neobench as nb, dataclasses; from neobench.compat import patches; "
        "p = patches.PATCHES['mteb-texts']; "
        "patches.PATCHES['mteb-texts'] = dataclasses.replace(p, verified='==0.0.1'); "
        "assert 'mteb-texts' not in patches.enabled()"
    )
    silent = _python(code)
    assert silent.returncode == 0 and silent.stderr == ""
    shown = _python("import logging; logging.basicConfig(); " + code)
    assert shown.returncode == 0 and "library patch mteb-texts off: mteb" in shown.stderr


def test_an_unknown_patch_name_is_refused_with_the_valid_ones(monkeypatch):
    monkeypatch.setenv(patches.ENV, "colum-cache")
    with pytest.raises(NeobenchError, match="Did you mean 'column-cache'") as error:
        patches.enabled()
    assert "prediction-json" in str(error.value)
    with pytest.raises(KeyError, match="not a declared library patch"):
        patches.on("my-patch")


def test_every_patch_is_declared_in_full():
    """Each patch: its library, what it replaces and why, its gain, a version range holding the
    tested version of its library, and an equality test that exists."""
    for name, patch in patches.PATCHES.items():
        tested = patches.TESTED[patches._normalized(patch.library)]
        assert Version(tested) in SpecifierSet(patch.verified), (name, patch.verified)
        assert patch.replaces and patch.why and patch.gain, name
        path, _, test = patch.test.partition("::")
        assert f"def {test}(" in (REPO / path).read_text(), (name, patch.test)
        if patch.changes is not None:
            assert callable(patches._changes(name)), name


def test_the_tested_versions_are_the_floors_of_pyproject_s_ranges():
    """constraints/tested.txt is what CI installs and what the gate compares; pyproject.toml
    opens each library to its next major version, from the tested one."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        declared[patches._normalized(requirement.name)] = requirement.specifier
    for name, version in patches.TESTED.items():
        assert name in declared, name
        specifier, tested = declared[name], Version(version)
        assert tested in specifier, (name, version, str(specifier))
        floors = [s.version for s in specifier if s.operator in (">=", "~=")]
        assert [Version(f) for f in floors] in (
            [tested],
            [Version(f"{tested.major}.{tested.minor}")],
        )
        assert Version(f"{tested.major + 1}") not in specifier, name  # below the next major


def test_scripts_install_the_tested_set():
    assert "-c" in (REPO / "scripts" / "venv.sh").read_text()
    assert "constraints/tested.txt" in (REPO / "scripts" / "venv.sh").read_text()


def test_nothing_but_the_registry_sets_attributes_by_name():
    """setattr/delattr, the way a patch sets an attribute of a library, appear only in the
    registry (and in the cards' reader, on neobench's own dataclasses)."""
    allowed = {"neobench/compat/patches.py", "neobench/core/cards.py"}
    found = set()
    for path in (REPO / "neobench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "setattr",
                "delattr",
            ):
                found.add(str(path.relative_to(REPO)))
    assert found <= allowed


# --- applying ------------------------------------------------------------------------------------


class Base:
    def f(self):
        return "base"

    @classmethod
    def make(cls):
        return cls


class Child(Base):
    pass


class Owner:
    @property
    def kind(self):
        return self.__dict__.get("_kind", "sdpa")

    @kind.setter
    def kind(self, value):
        self.__dict__["_kind"] = value


def _with(monkeypatch, changes):
    """A registry of one patch whose changes are ``changes``."""
    monkeypatch.setitem(
        patches.PATCHES,
        "test-patch",
        patches.Patch("mteb", "a test's attributes", "tests", "none", ">=0", "tests", changes),
    )


def test_an_inherited_attribute_is_removed_again_and_subclasses_still_bind(monkeypatch):
    stored = vars(Base)["make"]
    _with(monkeypatch, lambda: [(Child, "f", lambda self: "patched"), (Base, "make", stored)])
    with patches.applied("test-patch") as on:
        assert on and Child().f() == "patched" and Base().f() == "base"
    assert "f" not in vars(Child) and Child().f() == "base"
    assert vars(Base)["make"] is stored and Child.make() is Child  # the classmethod as stored


def test_blocks_nest_and_the_last_one_out_puts_the_original_back(monkeypatch):
    owner = Owner()
    _with(monkeypatch, lambda: [(owner, "kind", "varlen")])
    with patches.applied("test-patch"):
        with patches.applied("test-patch"):
            assert owner.kind == "varlen"
        assert owner.kind == "varlen"  # the outer block still runs
    assert owner.kind == "sdpa" and owner.__dict__["_kind"] == "sdpa"  # set back through it


def test_column_cache_is_set_only_inside_the_block():
    stock = Column.__iter__, Column.__getitem__
    with patches.applied("column-cache") as on:
        assert on and Column.__iter__ is not stock[0]
    assert (Column.__iter__, Column.__getitem__) == stock


# --- scores with patches on and off --------------------------------------------------------------


@pytest.mark.slow
def test_every_task_type_scores_the_same_with_patches_on_and_off(
    tiny_bert, mirror, tmp_path, monkeypatch
):
    """One task of each type: every score mteb records, and the per-item units, identical with
    the patches on and off (NEOBENCH_PATCHES=off); the run card records which ran. One embedding
    cache serves both runs, so the second encodes only texts the first did not (any text built
    differently would be encoded, and would move the scores). The patches change how texts are
    built and read, not the model: a 2-layer BERT with MiniLM's tokenizer encodes every text
    differently, as MiniLM does, at a fraction of its time."""

    cut_after_loading(monkeypatch, SHORTENED)

    def run(setting: str) -> tuple[dict, dict, list]:
        monkeypatch.setenv(patches.ENV, setting)
        results = tmp_path / setting
        cfg = EvalConfig(
            model=str(tiny_bert),
            tasks=EQUALITY_TASKS,
            instructions="none",
            max_seq_length="128",
            data_dir=str(mirror),
            results=str(results),
            cache_dir=str(tmp_path / "cache"),
            device="cpu",
        )
        summary = run_eval(cfg)
        assert not summary.failed
        loaded = mteb.ResultCache(results).load_results(load_experiments="match_name")
        scores = {
            r.task_name: json.dumps(r.scores, sort_keys=True)
            for r in loaded.model_results[0].task_results
        }
        folder = next(
            p.parent for p in results.rglob("SciFact.json") if p.parent.name != "neobench"
        )
        saved = {name: units.to_json(units.read(units.path_for(folder, name))) for name in scores}
        (card,) = (folder / "neobench").glob("run-*.yaml")
        written = yaml.safe_load(card.read_text())
        return scores, saved, written["library_patches"], written.get("library_patches_off")

    off_scores, off_units, off_card, off_why = run("off")
    on_scores, on_units, on_card, on_why = run("on")
    assert sorted(on_scores) == sorted(EQUALITY_TASKS)
    assert on_scores == off_scores
    assert on_units == off_units
    assert off_card == [] and on_card == patches.enabled() != []
    assert off_why == {"why": "NEOBENCH_PATCHES=off"} and on_why is None

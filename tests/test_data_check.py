"""`neobench data check` on real data: the sample manifest and its local files, the shared mirror,
and broken copies of manifests; the pins and licences of the standard's manifests; the recipe
hash over the rows' revisions. Offline (conftest), except the opt-in network test at the end."""

import json
import re

import pytest
import yaml
from conftest import REPO, SHARED

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.protocol import mirror as mirror_module
from neobench.protocol.data_check import check_manifest
from neobench.protocol.manifest import load_manifest, pin_problems
from neobench.protocol.recipe import apply_overrides, load_recipe

FINETUNE = SHARED / "data" / "finetune"
MANIFESTS = REPO / "datasets_manifest"
STSB = "mteb/stsbenchmark-sts"
STSB_REVISION = "b0fddb56ed78048fa8b90373c8a3cfc37b684831"  # neobert-mteb.yaml's pin


def run(capsys, *argv) -> tuple[int, str, list[str]]:
    """Exit code, stdout, and stderr's lines (each problem is one line there)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def listed(out: str) -> dict[str, str]:
    """Row key -> its listing line (plain columns: stdout is not a terminal here)."""
    return {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}


def test_the_sample_manifest_passes(capsys):
    code, out, err = run(
        capsys, "data", "check", "--manifest", "sample-local", "--data-dir", FINETUNE
    )
    rows = listed(out)
    assert code == 0 and set(rows) == {"SNLI", "AGNEWS", "STSB", "WIKIQA", "SCIFACT"}
    assert all(" local files  ok " in line for line in rows.values())
    assert "k=1 hard negatives" in rows["SNLI"] and "hub not needed" in out
    assert err == ["5 ok"]


@pytest.fixture
def data_dir(tmp_path, mirror):
    """One folder holding real data both ways: a sample file (data_files) and two mirrored repos
    (symlinks into the shared folders), with a lock: the STSBenchmark repo was fetched unpinned,
    at the commit neobert-mteb.yaml pins now."""
    folder = tmp_path / "data"
    (folder / "mteb").mkdir(parents=True)
    snli = "snli_triplets_dev_test.parquet"
    (folder / snli).symlink_to(FINETUNE / snli)
    for repo in (STSB, "mteb/scifact"):
        (folder / repo).symlink_to(mirror / repo)
    lock = {STSB: {"pinned_revision": None, "resolved_revision": STSB_REVISION}}
    (folder / mirror_module.LOCK_FILE).write_text(json.dumps(lock))
    return folder


def row(**spec) -> dict:
    return {"licence": "test", "source": "neobench", "instruction": "ALLNLI", **spec}


def write_manifest(path, rows: dict) -> str:
    path.write_text(yaml.safe_dump({"name": path.stem, "datasets": rows}, sort_keys=False))
    return str(path)


def test_every_problem_of_a_broken_manifest_is_one_line_and_exit_2(capsys, tmp_path, data_dir):
    snli = "snli_triplets_dev_test.parquet"
    sts = {"hf_id": STSB, "query": "sentence1", "positive": "sentence2"}
    broken = write_manifest(
        tmp_path / "broken.yaml",
        {
            "RENAMED": row(data_files=snli, query="query", positive="positve"),
            "NEGATIVES": row(
                data_files=snli,
                query="query",
                positive="positive",
                negatives=["negative"],
                num_negatives=3,
            ),
            "CONFIG": row(**sts, config="pairs", revision=STSB_REVISION),
            "REVISION": row(**sts, revision="0123456789abcdef0123456789abcdef01234567"),
            "GOOD": row(**sts, revision=STSB_REVISION, filters={"score": {"min": 4.0}}),
            "BEIR": row(
                hf_id="mteb/scifact",
                config="default",
                join="beir",
                query="text",
                positive="text",
            ),
        },
    )
    code, out, err = run(capsys, "data", "check", "--manifest", broken, "--data-dir", data_dir)
    rows = listed(out)
    assert code == 2
    assert {k for k, line in rows.items() if " problem " in line} == {
        "RENAMED",
        "NEGATIVES",
        "CONFIG",
        "REVISION",
    }
    assert " ok " in rows["GOOD"] and "lock: b0fddb56ed78" in rows["GOOD"]
    assert " ok " in rows["BEIR"] and "queries/queries" in rows["BEIR"]
    errors = [line for line in err if line.startswith("error:")]
    assert len(errors) == 4 and all(" Fix: " in line for line in errors)
    renamed, negatives, config, revision = errors
    assert renamed.startswith("error: broken: RENAMED: column 'positve' is not in")
    assert "Did you mean 'positive'?" in renamed
    assert "NEGATIVES: needs k=3 hard negatives per row" in negatives
    assert "has more than 1" in negatives and "`num_negatives: 1`" in negatives
    assert "CONFIG: config 'pairs' is not in the mirror's copy of mteb/stsbenchmark-sts" in config
    assert "(it has ['default'])" in config
    assert "REVISION: revision 0123456789abcdef0123456789abcdef01234567 is not" in revision
    assert STSB_REVISION in revision and "neobench data prefetch" in revision


def test_the_standard_manifest_offline_names_the_rows_it_could_not_check(capsys, mirror):
    """The shared mirror holds two of the 22 rows' repos: STSBenchmark checks, STS12's copy
    lacks the train split (a problem: exit 2), the other 20 are not checked, with why."""
    code, out, err = run(
        capsys, "data", "check", "--manifest", "neobert-mteb", "--data-dir", mirror
    )
    rows = listed(out)
    assert code == 2 and len(rows) == 22
    unchecked = {k for k, line in rows.items() if " not checked " in line}
    assert len(unchecked) == 20 and {"STS12", "STSBENCHMARK"}.isdisjoint(unchecked)
    assert all("not in the mirror; HF_HUB_OFFLINE is set" in rows[k] for k in unchecked)
    assert " ok " in rows["STSBENCHMARK"] and "revision not recorded" in rows["STSBENCHMARK"]
    (error,) = [line for line in err if line.startswith("error:")]
    assert "STS12: split 'train' is not in the mirror's copy of mteb/sts12-sts" in error
    assert "(it has ['test'])" in error and "neobench data prefetch --recipe" in error
    assert "20 row(s) not checked (not a failure" in " ".join(err)


def test_rows_not_checked_are_not_a_failure(capsys, tmp_path, mirror):
    (tmp_path / "mteb").mkdir()
    (tmp_path / STSB).symlink_to(mirror / STSB)
    code, _, err = run(
        capsys, "data", "check", "--manifest", "neobert-mteb", "--data-dir", tmp_path
    )
    assert code == 0 and "1 ok, 21 not checked" in err
    assert not [line for line in err if line.startswith("error:")]


def test_without_a_data_dir_local_rows_say_how_to_check_them(tmp_path):
    report = check_manifest("sample-local", None)
    assert {r.status for r in report.rows} == {"not checked"}
    assert all("pass --data-dir" in r.detail for r in report.rows) and not report.problems


# ------------------------------------------------------------------ pins, licences and the hash

FULL = re.compile(r"^[0-9a-f]{40}$")


@pytest.mark.parametrize("name", ["neobert-mteb", "msmarco-triplets"])
def test_every_row_of_the_standard_is_pinned_or_says_why_not(name):
    manifest = load_manifest(name)
    for key, found in manifest.rows.items():
        if found.revision is None:
            assert found.pin.strip(), key
        else:
            assert FULL.match(found.revision) and not found.pin, key
    assert pin_problems(manifest) == []


def test_the_standard_pins_and_licences_of_the_cards():
    rows = load_manifest("neobert-mteb").rows
    assert len(rows) == 22 and sum(r.revision is not None for r in rows.values()) == 20
    assert {k for k, r in rows.items() if r.revision is None} == {"CONCURRENTQA", "QQP"}
    assert "8bac11c" in rows["CONCURRENTQA"].pin and "42e70d8" in rows["QQP"].pin
    assert "prefetch" in rows["QQP"].pin
    assert rows["FEVER"].licence.split()[0] == "cc-by-nc-sa-3.0"
    assert rows["PAQ"].licence == rows["QQP"].licence == "mit"
    assert "cc-by-nc-sa-4.0" in rows["STACKOVERFLOW"].licence


def test_pin_is_a_known_field_and_is_checked(tmp_path):
    base = {"hf_id": "org/repo", "query": "q", "positive": "p"}
    path = write_manifest(
        tmp_path / "pins.yaml",
        {
            "TYPO": row(**base, revision=None, pinn="short id abc1234"),
            "BOTH": row(**base, revision=STSB_REVISION, pin="short id abc1234"),
            "SHORT": row(**base, revision="abc1234"),
        },
    )
    with pytest.raises(NeobenchError) as error:
        load_manifest(path)
    typo, both, short = error.value.problems
    assert "TYPO: unknown field 'pinn'. Did you mean 'pin'?" in typo
    assert "BOTH: pin explains a null revision, but the row pins" in both
    assert "SHORT: revision 'abc1234' is not a 40-hex commit" in short and "`pin:`" in short
    bare = load_manifest(write_manifest(tmp_path / "bare.yaml", {"BARE": row(**base)}))
    (problem,) = pin_problems(bare)
    assert "BARE: revision null without a `pin:` note" in problem


def test_prefetch_warns_for_each_unpinned_row_with_the_commit_it_holds():
    rows = load_manifest("neobert-mteb").rows.values()
    needs = [mirror_module.RepoNeed(r.key, r.hf_id, r.revision, r.key) for r in rows]
    commit = "1" * 40
    lock = {"embedding-data/QQP_triplets": {"pinned_revision": None, "resolved_revision": commit}}
    lines = mirror_module.unpinned_warnings(needs, lock)
    assert len(lines) == 2 and lines[0].startswith("CONCURRENTQA: stanfordnlp/")
    assert lines[1] == (
        f"QQP: embedding-data/QQP_triplets is not pinned (revision null): the mirror holds commit "
        f"{commit}, its head when fetched (recorded in {mirror_module.LOCK_FILE}). Pin it: "
        f"`revision: {commit}` in the manifest row."
    )


def test_a_changed_revision_changes_the_recipe_hash(tmp_path):
    text = (MANIFESTS / "neobert-mteb.yaml").read_text()
    path = tmp_path / "neobert-mteb.yaml"

    def sha(manifest_text: str, **overrides: str) -> str:
        path.write_text(manifest_text)
        recipe = apply_overrides(
            load_recipe("neobert-mteb-2k"), {"manifest": str(path), **overrides}
        )
        return recipe.sha256

    other_sts = text.replace(STSB_REVISION, "f" * 40)
    other_allnli = text.replace("cc6c526380e29912b5c6fa03682da4daf773c013", "e" * 40)
    assert sha(text) == sha(text) != sha(other_sts) != sha(other_allnli)
    # A row the recipe does not train on is not its data.
    assert sha(text, datasets="STSBENCHMARK") == sha(other_allnli, datasets="STSBENCHMARK")
    assert sha(text, datasets="STSBENCHMARK") != sha(other_sts, datasets="STSBENCHMARK")
    assert load_recipe("neobert-mteb-2k").revisions()["STSBENCHMARK"] == STSB_REVISION


# ------------------------------------------------------------------------- opt-in: the hub


@pytest.mark.network
def test_on_the_hub_a_pinned_row_checks_and_an_unknown_revision_is_named(online, tmp_path):
    sts = {"hf_id": STSB, "query": "sentence1", "positive": "sentence2"}
    path = write_manifest(
        tmp_path / "hub.yaml",
        {
            "PINNED": row(**sts, revision=STSB_REVISION),
            "UNKNOWN": row(**sts, revision="0" * 40),
        },
    )
    report = check_manifest(path, None)
    pinned, unknown = report.rows
    assert pinned.status == "ok" and pinned.where == f"hub @ {STSB_REVISION[:12]}"
    (problem,) = report.problems
    assert unknown.status == "problem" and f"the hub has no revision {'0' * 40}" in problem

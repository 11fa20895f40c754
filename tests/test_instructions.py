import mteb
import pytest
from mteb.models.abs_encoder import get_prompt_name
from mteb.types import PromptType

from neobench.core.errors import NeobenchError
from neobench.protocol.instructions import (
    all_mteb_task_names,
    expand,
    list_profiles,
    load_profile,
    mteb_prompts,
    validate_profile,
)


@pytest.fixture(scope="module")
def known_tasks() -> set[str]:
    return all_mteb_task_names()


def test_shipped_profiles_are_the_three_of_the_standard():
    assert list_profiles() == ["authors-code", "none", "paper"]


@pytest.mark.parametrize("name", ["paper", "authors-code", "none"])
def test_every_key_names_a_real_mteb_task(name, known_tasks):
    profile = load_profile(name)
    assert validate_profile(profile, known_tasks) == []


def test_validate_reports_a_bad_key_with_did_you_mean(known_tasks):
    profile = load_profile("paper")
    broken = type(profile)(
        profile.name,
        profile.source,
        profile.separator,
        {**profile.instructions, "STSBenchmrk": "x"},
        profile.aliases,
    )
    problems = validate_profile(broken, known_tasks)
    assert len(problems) == 1 and "'STSBenchmark'" in problems[0]


@pytest.mark.parametrize("benchmark", ["MTEB(eng, v1)", "MTEB(eng, v2)"])
def test_paper_profile_covers_every_task_of_both_benchmarks(benchmark):
    tasks = list(mteb.get_benchmark(benchmark).tasks)
    prompts, missing = mteb_prompts(load_profile("paper"), tasks)
    assert missing == []
    assert len(prompts) == len(expand(tasks))  # one prompt key per encoded task


def test_paper_prompts_follow_the_recipe_format():
    tasks = list(mteb.get_benchmark("MTEB(eng, v1)").tasks)
    prompts, _ = mteb_prompts(load_profile("paper"), tasks)
    # Retrieval / Reranking: queries only; documents stay untouched.
    assert prompts["SciFact-query"] == (
        "Given a scientific claim, retrieve documents that support or refute the claim . "
    )
    assert "SciFact" not in prompts and "SciFact-document" not in prompts
    assert "SciDocsRR-query" in prompts
    # Symmetric types: every text, instruction + one space.
    assert prompts["STSBenchmark"] == "Retrieve semantically similar text. "
    assert prompts["Banking77Classification"].endswith("intents. ")
    # The 12 CQADupstack sub-forums are what mteb encodes; they share one instruction.
    cqa = [k for k in prompts if k.startswith("CQADupstack")]
    assert len(cqa) == 12 and len({prompts[k] for k in cqa}) == 1


def test_prompts_resolve_through_mteb_on_the_right_side():
    scifact = mteb.get_task("SciFact")
    sts = mteb.get_task("STSBenchmark")
    prompts, _ = mteb_prompts(load_profile("paper"), [scifact, sts])
    assert get_prompt_name(prompts, scifact.metadata, PromptType.query) == "SciFact-query"
    assert get_prompt_name(prompts, scifact.metadata, PromptType.document) is None
    for side in (None, PromptType.query, PromptType.document):
        assert get_prompt_name(prompts, sts.metadata, side) == "STSBenchmark"


def test_authors_code_profile_has_both_sides_and_verbatim_strings():
    tasks = list(mteb.get_benchmark("MTEB(eng, v1)").tasks)
    prompts, missing = mteb_prompts(load_profile("authors-code"), tasks)
    assert prompts["ArguAna-query"].endswith("Claim: ")
    assert prompts["ArguAna-document"].endswith("Document: ")
    assert prompts["STSBenchmark"] == "Retrieve semantically similar text."
    assert sorted(missing) == ["STS17", "STS22"]  # not in the authors' maps


def test_none_profile_gives_no_prompt():
    prompts, missing = mteb_prompts(
        load_profile("none"), list(mteb.get_benchmark("MTEB(eng, v1)").tasks)
    )
    assert prompts == {} and missing == []


def test_hash_depends_on_content_only():
    a, b = load_profile("paper"), load_profile("paper")
    assert a.sha256 == b.sha256 and len(a.sha256) == 64
    assert a.sha256 != load_profile("authors-code").sha256


def test_unknown_profile_suggests_the_closest():
    with pytest.raises(NeobenchError, match="Did you mean 'paper'"):
        load_profile("papr")


def test_profile_file_with_bad_alias_is_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text('instructions:\n  STS12: "x"\naliases:\n  STS13: STS99\nextra: 1\n')
    with pytest.raises(NeobenchError) as error:
        load_profile(str(path))
    assert len(error.value.problems) == 2  # both problems at once

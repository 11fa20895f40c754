"""A study job's kind carries what running it means (neobench/study/kinds.py): no other module of
neobench tells the kinds apart by their words, and the kind survives the trip to a Slurm node."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

from neobench.core import cards
from neobench.study.jobs import Job
from neobench.study.kinds import JobKind
from neobench.study.launchers.slurm_job import JobCommand

PACKAGE = Path(__file__).resolve().parent.parent / "neobench"
HOME = PACKAGE / "study" / "kinds.py"
WORDS = {kind.value for kind in JobKind}


def _words(node: ast.expr) -> set[str]:
    """The job-kind words a compared operand names: a string, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & WORDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_words(e) for e in node.elts)) if node.elts else set()
    return set()


def _is_kind(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def kind_word_branches(root: Path) -> list[str]:
    """`<x>.kind == "eval"`, `<x>.kind in ("finetune", "eval")` and the like, outside
    study/kinds.py: file:line and the source of the comparison."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == HOME:
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_is_kind(s) for s in sides) and any(_words(s) for s in sides):
                where = path.relative_to(root.parent)
                found.append(f"{where}:{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_no_module_but_kinds_tells_the_job_kinds_apart_by_their_words():
    assert kind_word_branches(PACKAGE) == []


def test_the_scan_finds_a_branch_on_a_kind_word(tmp_path):
    """The scan itself: it sees the comparisons the package once had."""
    (tmp_path / "launcher.py").write_text(
        "def f(job, kinds):\n"
        "    if job.kind == 'finetune':\n"
        "        return 1\n"
        "    return job.kind not in ('finetune', 'eval') or kinds.kind == 'other'\n"
    )
    assert kind_word_branches(tmp_path) == [
        f"{tmp_path.name}/launcher.py:2: job.kind == 'finetune'",
        f"{tmp_path.name}/launcher.py:4: job.kind not in ('finetune', 'eval')",
    ]


def test_a_job_s_kind_and_its_behaviour_survive_submitit_s_pickle(tmp_path):
    """submitit pickles the JobCommand and the node unpickles it: the kind comes back as the
    same member, and the job's progress is read there by it."""
    results = tmp_path / "results" / "study__m" / "rev"
    results.mkdir(parents=True)
    (results / "BIOSSES.json").write_text("{}")
    job = Job("eval", "eval/m-seed0/1of1", ["eval"], tmp_path, tmp_path / "log", None)
    job.tasks = ["BIOSSES", "STS16"]
    assert job.kind is JobKind.EVAL  # the word is taken for the kind
    command = pickle.loads(pickle.dumps(JobCommand(["true"], str(tmp_path), job, "MTEB(eng, v1)")))
    assert command.job.kind is JobKind.EVAL
    assert command._progress() == 1


def test_only_a_fine_tune_s_card_says_whether_an_exit_0_finished_it(tmp_path):
    """A fine-tune exits 0 at a time-limit notice too; its card is its word. An eval's, a
    table's or a GLUE run's exit status is its own, and they keep no card of a running job to
    close."""
    assert JobKind.FINETUNE.unfinished(tmp_path) == "it wrote no fine-tune card"
    assert JobKind.EVAL.unfinished(tmp_path) is None
    assert JobKind.TABLE.unfinished(tmp_path) is None
    assert JobKind.GLUE.unfinished(tmp_path) is None
    card = tmp_path / cards.FINETUNE_CARD
    card.write_text("status: running\n")
    JobKind.EVAL.close_card(tmp_path, "killed")
    assert card.read_text() == "status: running\n"
    JobKind.FINETUNE.close_card(tmp_path, "killed (SIGKILL)")
    assert cards.read_finetune_card(card).status == "interrupted: killed (SIGKILL)"
    assert JobKind.FINETUNE.unfinished(tmp_path) == (
        "its fine-tune card says interrupted: killed (SIGKILL)"
    )
    assert [k.exit_zero_is_done for k in JobKind] == [False, True, True, True]


def test_every_kind_has_its_resources_section_in_a_study_s_slurm_section():
    from neobench.study.spec import RESOURCE_SECTIONS

    assert tuple(kind.value for kind in JobKind) == RESOURCE_SECTIONS

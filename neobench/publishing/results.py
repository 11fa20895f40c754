"""A run in the layout of the MTEB results repository (github.com/embeddings-benchmark/results):
``results/<org__model>/<revision>/<Task>.json`` beside ``model_meta.json``, one revision per seed,
written through mteb's ResultCache so that mteb reads it back with the same scores; and `--submit`,
a branch of a clone of that repository made by mteb's own submit.
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neobench._version import __version__
from neobench.core import cards, results
from neobench.core.errors import NeobenchError, writable_folder_problems
from neobench.core.runs import Run, find, find_one

logger = logging.getLogger(__name__)

RESULTS_REMOTE = "https://github.com/embeddings-benchmark/results"


@dataclass
class Member:
    """One published revision: a seed of the fine-tune (or the one run), its eval card, the
    fine-tune card of the model it evaluated (None: not a neobench fine-tune) and its ModelMeta."""

    run: Run
    eval_card: cards.EvalCard
    tune: cards.FinetuneCard | None
    meta: Any  # mteb's ModelMeta, as published

    @property
    def seed(self) -> int | None:
        """The fine-tune's seed; None for a model neobench did not fine-tune."""
        return self.run.finetune.seed if self.run.finetune else None

    @property
    def model_path(self) -> str:
        return str(self.eval_card.model.path or self.eval_card.config.get("model") or "")


@dataclass
class Publication:
    name: str  # the name it is published under (a hub id: org/model)
    label: str  # the run's row label in the results root
    run: Run  # seed replicates merged
    members: list[Member]
    pointed: Member  # the seed the model card is written for (the median average)
    benchmark: str
    base: str | None = None  # the row label of the base model's own run in the results root


def prepare(
    root: Path, model: str, name: str | None, benchmark: str, open_weights: bool
) -> Publication:
    """The run ``model`` names under ``root``, checked publishable: every stored score the one
    its run card recorded, every task of it complete."""
    from neobench.protocol.tasks import load_benchmark
    from neobench.report.load import load

    runs, problems, _ = load([root], list(load_benchmark(benchmark).tasks))
    if not runs:
        raise NeobenchError([f"--results {root}: no evaluated run to publish.", *problems])
    label, run = find_one(find(runs, None), model)
    refused = [f"{task}: {why}" for task, why in {**run.mismatched, **run.card_missing}.items()]
    if refused:
        raise NeobenchError(
            [f"{label}: {len(refused)} task(s) cannot be published as they are:", *refused]
        )
    check_name(name or run.model, given=bool(name))
    name = name or run.model
    members = [_member(each, name, open_weights) for each in (run.members or [run])]
    pointed = _median(members)
    return Publication(name, label, run, members, pointed, benchmark, _base(runs, pointed))


def check_name(name: str, given: bool) -> None:
    """Refuse, before anything is written, a --name (or the run's name, its default) that is
    not a hub id."""
    why = hub_id_problem(name)
    if why:
        what = f"--name {name!r}" if given else f"--name not given, and the run's name {name!r}"
        raise NeobenchError(
            f"{what}: the results repository files a model by its hub id, org/name, and this "
            f"is not one ({why}). Pass --name org/name in letters, digits, '-', '_' and '.' "
            "(e.g. --name my-lab/bert-base-neobench)."
        )


def hub_id_problem(repo: str) -> str:
    """Why ``repo`` is not a hub id of the form org/name ('' when it is): huggingface_hub's own
    check (validate_repo_id), what the hub refuses."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if repo.count("/") != 1:
        return "more than one '/'" if "/" in repo else "no '/'"
    try:
        validate_repo_id(repo)
    except HFValidationError as error:  # its own words, less the id it repeats at their end
        return "huggingface_hub: " + str(error).rsplit(": '", 1)[0].rstrip(".")
    return ""


def _base(runs: list[Run], member: Member) -> str | None:
    """The label of the run that evaluated the model ``member`` was fine-tuned from (the same
    folder or hub id), if the results root holds one."""
    if member.tune is None:
        return None
    base = str(member.tune.config.get("model") or "")
    wanted = {base, str(Path(base).expanduser().resolve()) if base else ""} - {""}
    for label, other in find(runs, None):
        paths = results.card_paths((other.members or [other])[0].folder)
        if paths and str(cards.read_eval_card(paths[-1]).model.path or "") in wanted:
            return label
    return None


def _member(run: Run, name: str, open_weights: bool) -> Member:
    from mteb.models import ModelMeta

    paths = results.card_paths(run.folder)
    eval_card = cards.read_eval_card(paths[-1])
    folder = Path(str(eval_card.model.path or ""))
    tune = cards.folder_card(folder) if folder.is_dir() else None
    meta_file = run.folder / results.META
    if not meta_file.is_file():
        raise NeobenchError(
            f"{run.folder}: no {results.META} (mteb writes it beside the results); re-run the "
            "same `neobench eval` into a new --results root."
        )
    meta = ModelMeta.model_validate_json_resolved(meta_file.read_text(encoding="utf-8"))
    n_parameters = weight_count(folder) if folder.is_dir() else None
    update: dict[str, Any] = {
        "name": name,
        "revision": run.revision,
        "release_date": (tune.finished if tune and tune.finished else eval_card.started or "")[:10]
        or None,
        "n_parameters": n_parameters or meta.n_parameters,
        "memory_usage_mb": round(n_parameters * 4 / 2**20, 1) if n_parameters else None,
        "open_weights": True if open_weights else meta.open_weights,
        "framework": sorted({*meta.framework, "Sentence Transformers", "PyTorch"}),
    }
    if tune is not None:
        recipe = tune.recipe
        update["public_training_code"] = (
            f"neobench {__version__}: recipe {recipe.get('name')} v{recipe.get('version')} "
            f"(sha256 {str(recipe.get('sha256'))[:16]})"
        )
        base = tune.output_model.adapted_from or tune.model.name
        if base and base.count("/") == 1 and not base.startswith("local/"):  # a hub id
            update["adapted_from"] = base
    return Member(run, eval_card, tune, meta.model_copy(update=update))


def weight_count(folder: Path) -> int | None:
    """Parameters in the folder's safetensors files, read from their headers (no weights loaded):
    the backbone's, under its module folder when the folder is a SentenceTransformer's."""
    from neobench.models.backbone import safetensors_tensors
    from neobench.models.load import transformer_folder

    total = 0
    for path in sorted(transformer_folder(folder).glob("*.safetensors")):
        for entry in safetensors_tensors(path).values():
            total += math.prod(int(dim) for dim in entry["shape"])
    return total or None


def _median(members: list[Member]) -> Member:
    """The seed whose average over its tasks is the median (the lower one of an even count)."""

    def average(member: Member) -> float:
        scores = member.run.scores
        return sum(scores.values()) / len(scores) if scores else 0.0

    ranked = sorted(members, key=lambda m: (average(m), m.seed or 0))
    return ranked[(len(ranked) - 1) // 2]


def write_results(pub: Publication, folder: Path) -> list[Path]:
    """Every member's task results and model_meta.json under ``folder``/results, through mteb's
    ResultCache; the files written."""
    import mteb
    from mteb.results import TaskResult

    cache = mteb.ResultCache(folder)
    written: list[Path] = []
    for member in pub.members:
        for path in results.task_files(member.run.folder):
            result = TaskResult.from_disk(path)
            cache.save_to_cache(result, member.meta)
            written.append(cache.get_task_result_path(result.task_name, member.meta))
    return written


# --------------------------------------------------------------------------------- --submit


def check_clone(clone: Path, remote: str) -> None:
    """Refuse, before anything is written, a folder that is not a clean clone of the results
    repository whose origin is ``remote``, or whose origin cannot be reached."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", *args], cwd=clone, capture_output=True, text=True, timeout=60, check=False
        )

    fix = (
        f"clone it first (git clone {RESULTS_REMOTE}) and pass that folder; --results-remote "
        "names another origin"
    )
    if not clone.is_dir() or git("rev-parse", "--show-toplevel").returncode != 0:
        raise NeobenchError(f"--submit {clone}: not a git repository; {fix}.")
    origin = git("config", "--get", "remote.origin.url").stdout.strip()
    if origin.removesuffix(".git").rstrip("/") != remote.removesuffix(".git").rstrip("/"):
        raise NeobenchError(
            f"--submit {clone}: its origin is {origin or 'not set'}, not the results repository "
            f"{remote}; {fix}."
        )
    if not (clone / "results").is_dir():
        raise NeobenchError(f"--submit {clone}: no results/ folder: not the results repository.")
    if git("status", "--porcelain").stdout.strip():
        raise NeobenchError(
            f"--submit {clone}: it has uncommitted changes; commit or stash them first."
        )
    # The fetch and mteb's commit write into it: read-only, they would fail after --out.
    problems = writable_folder_problems(
        clone, "--submit", "Pass a clone you can write (or clone the repository anew)."
    )
    if problems:
        raise NeobenchError(problems)
    try:
        fetched = git("fetch", "--quiet", "origin")
    except subprocess.TimeoutExpired:
        fetched = None
    if fetched is None or fetched.returncode != 0:
        why = fetched.stderr.strip().splitlines()[-1] if fetched and fetched.stderr else "timed out"
        raise NeobenchError(
            f"--submit {clone}: its origin {origin} cannot be reached ({why}); submit from a "
            "connected machine."
        )


def current_branch(clone: Path) -> str:
    done = subprocess.run(
        ["git", "branch", "--show-current"], cwd=clone, capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def submit(folder: Path, pub: Publication, clone: Path, remote: str) -> dict[str, Any]:
    """A branch of ``clone`` holding the published results the repository lacks, made by mteb's
    submit (ResultCache.submit_results) over a cache whose remote is ``clone``; its response."""
    import mteb

    class ResultsClone(mteb.ResultCache):
        """mteb's cache over the published folder, with the user's clone as its remote. The
        clone was fetched and checked (check_clone): its branch and files are left as they are,
        where mteb's own download would reset its cache's clone to the remote's head."""

        def download_from_remote(self, *args: Any, **kwargs: Any) -> Path:
            return self.remote_repo_path

    with tempfile.TemporaryDirectory(prefix="neobench-submit-") as tmp:
        staging = Path(tmp)
        shutil.copytree(folder / results.RESULTS, staging / results.RESULTS)
        (staging / "remote").symlink_to(clone.resolve(), target_is_directory=True)
        cache = ResultsClone(staging)
        response = cache.submit_results(
            [m.meta for m in pub.members],
            create_pr=False,
            message=f"Add MTEB results of {pub.name} (neobench {__version__})",
        )
    return dict(response)

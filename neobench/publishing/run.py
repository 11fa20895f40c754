"""`neobench publish` end to end (`nb.publish`): every input checked before anything is written
(the folder, --verify's model folder and data, the clone, the hub token), the results repository's
layout and the model card staged and renamed into place, read back through mteb, then submitted,
pushed and verified as asked (docs/publish.md). What happened is the returned `Published`; the
CLI prints its lines."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError, writable_folder_problems
from neobench.publishing import card, results, verify
from neobench.publishing.config import PublishCommand


@dataclass
class Published:
    """What `publish` wrote and did."""

    out: Path
    name: str
    written: list[Path]
    revisions: int
    seed: int | None
    read_back: int  # result files mteb's ResultCache read back with the same scores
    experiment_kwargs: dict[str, Any] | None = None
    clone: Path | None = None
    submitted: dict[str, Any] | None = None  # mteb's submit response
    branch: str | None = None
    pushed: str | None = None  # the hub repo's URL
    model_folder: Path | None = None
    hub_repo: str | None = None
    eval_results: str | None = None  # what became of mteb's .eval_results on the push
    checks: list[verify.Check] = field(default_factory=list)
    verified: bool = False  # --verify ran

    @property
    def ok(self) -> bool:
        """Every --verify re-run within 0.001 (true when none was asked)."""
        return all(c.within for c in self.checks)

    def lines(self) -> list[str]:
        which = "the model card" if self.seed is None else f"the card of seed {self.seed}"
        out = [
            f"wrote {self.out}: {len(self.written)} result file(s) of {self.revisions} "
            f"revision(s) of {self.name}, and README.md ({which})",
            f"mteb's ResultCache reads {self.read_back} result(s) back with the same scores",
        ]
        if self.experiment_kwargs:
            out.append(
                f"note: evaluated under {self.experiment_kwargs}, not mteb's plain conditions: "
                "the results sit under experiments/, not shown by the leaderboard as the model's"
            )
        if self.submitted is not None:
            if self.submitted.get("status") == "no_changes":
                out.append(f"submit: {self.clone} already holds every published result")
            else:
                count = self.submitted.get("result_count", 0)
                out.append(
                    f"submit: {count} result file(s) committed to branch {self.branch} of "
                    f"{self.clone}; push it to your fork (git -C {self.clone} push FORK "
                    f"{self.branch}) and open the pull request"
                )
        if self.pushed is not None:
            out.append(f"pushed {self.model_folder} and its card to {self.hub_repo}: {self.pushed}")
            out.append(f"eval results (mteb's .eval_results): {self.eval_results}")
        if self.verified:
            out += [f"verify {check.line()}" for check in self.checks]
            within = sum(c.within for c in self.checks)
            out.append(f"verify: {within} of {len(self.checks)} task(s) within 0.001")
        return out


def run_publish(cfg: PublishCommand) -> Published:
    """Publish ``cfg.model``'s run of ``cfg.results`` into the new folder ``cfg.out`` (the
    module's doc); bad input is one NeobenchError before anything is written."""
    out, root = Path(cfg.out).expanduser(), Path(cfg.results)
    problems = _out_problems(out)
    if cfg.verify < 0:
        problems.append(f"--verify {cfg.verify}: a number of tasks, 0 or more.")
    if problems:
        raise NeobenchError(problems)
    pub = results.prepare(root, cfg.model, cfg.name, cfg.benchmark, bool(cfg.push_to_hub))
    # What --verify re-runs from (the model folder its run card records, the data) is here.
    rerun = verify.plan(pub.pointed, cfg.verify, cfg.data_dir) if cfg.verify else None
    # What needs a remote is checked before anything is written.
    clone = Path(cfg.submit).expanduser() if cfg.submit else None
    if clone is not None:
        results.check_clone(clone, cfg.results_remote)
    token = card.check_push(cfg.push_to_hub) if cfg.push_to_hub else None
    why_not = card.eval_results_problem(pub, cfg.push_to_hub) if cfg.push_to_hub else None
    model_folder = Path(pub.pointed.model_path)
    if cfg.push_to_hub and not model_folder.is_dir():
        raise NeobenchError(
            f"--push-to-hub: the model folder {model_folder} its run card names is not here."
        )
    table, intervals = _table(root, pub)
    model_card = card.model_card(pub, table, intervals)
    written = _write(out, pub, model_card.content)
    done = Published(
        out, pub.name, written, len(pub.members), pub.pointed.seed, _read_back(out, pub),
        experiment_kwargs=pub.pointed.meta.experiment_kwargs,
    )  # fmt: skip
    if clone is not None:
        done.clone = clone
        done.submitted = results.submit(out, pub, clone, cfg.results_remote)
        if done.submitted.get("status") != "no_changes":
            done.branch = results.current_branch(clone)
    if cfg.push_to_hub and token:
        done.model_folder, done.hub_repo = model_folder, cfg.push_to_hub
        done.pushed = card.push(cfg.push_to_hub, token, model_folder, model_card.content)
        if why_not is None:
            card.push_eval_results(out, pub)
            done.eval_results = f"pushed to {cfg.push_to_hub}"
        else:
            done.eval_results = f"not pushed: {why_not}"
    if rerun is not None:
        done.checks, done.verified = verify.verify(rerun), True
    return done


def _write(out: Path, pub: results.Publication, readme: str) -> list[Path]:
    """The layout and README.md staged beside ``out`` and renamed into place: ``out`` holds all
    of it or nothing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        written = results.write_results(pub, staging)
        (staging / "README.md").write_text(readme, encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked before)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / path.relative_to(staging) for path in written]


def _out_problems(out: Path) -> list[str]:
    """Why ``out`` cannot be written in full: not a new (or empty) folder, or its folder (where
    it is staged, then renamed into place) not writable; found without creating anything."""
    fix = "Pass a new folder you can write, e.g. --out publish/my-model."
    problems = writable_folder_problems(out, "--out", fix)
    if problems:
        return problems
    if out.exists() and any(out.iterdir()):
        return [f"--out {out}: exists and is not empty; name a new folder."]
    if out.exists():  # empty: staged beside it, then renamed over it
        return writable_folder_problems(out.parent, f"--out {out}: its folder", fix)
    return []


def _table(root: Path, pub: results.Publication) -> tuple[str, bool]:
    """The run's row and its base model's (when the results root holds its run) with intervals
    where units were saved, as `neobench table --format md` prints it; and whether the run's
    row has intervals."""
    from neobench.core import results as layout
    from neobench.report.leaderboard import leaderboard
    from neobench.report.render.table import to_markdown

    ci = all(layout.has_units(m.run.folder) for m in pub.members)
    models = [pub.label, pub.base] if pub.base else [pub.label]
    table = leaderboard([root], pub.benchmark, models=models, ci=ci)
    intervals = any(row.ci for row in table.rows if row.label == pub.label)
    return to_markdown(table), intervals


def _read_back(out: Path, pub: results.Publication) -> int:
    """mteb's ResultCache reads the folder back with the scores the run holds, or this fails;
    the count of results it read."""
    import mteb
    from mteb.results import TaskResult

    from neobench.core import results as layout

    loaded = mteb.ResultCache(out).load_results(models=[m.meta for m in pub.members])
    found = {
        (model.model_revision, task.task_name): task.get_score()
        for model in loaded.model_results
        for task in model.task_results
    }
    expected = 0
    for member in pub.members:
        for path in layout.task_files(member.run.folder):
            result = TaskResult.from_disk(path)
            key = (member.run.revision, result.task_name)
            if found.get(key) != result.get_score():
                raise NeobenchError(
                    f"{out}: mteb reads {result.task_name} of {member.run.revision} back as "
                    f"{found.get(key)}, not {result.get_score()}; nothing was submitted or pushed."
                )
            expected += 1
    return expected

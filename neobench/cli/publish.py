"""`neobench publish`: a run in the results repository's layout with its model card, checked
before anything is written, then submitted, pushed and verified as asked (docs/publish.md)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from neobench.cli import commands
from neobench.cli.output import say
from neobench.core.errors import NeobenchError


def cmd_publish(cfg: commands.PublishCommand) -> int:
    """one run in the MTEB results repository's layout with its model card; submit, push, verify"""
    from neobench.publish import card, results, verify

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
    model_folder = Path(pub.pointed.model_path)
    if cfg.push_to_hub and not model_folder.is_dir():
        raise NeobenchError(
            f"--push-to-hub: the model folder {model_folder} its run card names is not here."
        )
    table, intervals = _table(root, pub)
    model_card = card.model_card(pub, table, intervals)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        written = results.write_results(pub, staging)
        (staging / "README.md").write_text(model_card.content, encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    revisions = f"{len(written)} result file(s) of {len(pub.members)} revision(s) of {pub.name}"
    seed = pub.pointed.seed
    which = "the model card" if seed is None else f"the card of seed {seed}"
    say(f"wrote {out}: {revisions}, and README.md ({which})", markup=False)
    _read_back(out, pub)
    kwargs = pub.pointed.meta.experiment_kwargs
    if kwargs:
        note = f"note: evaluated under {kwargs}, not mteb's plain conditions: the results sit "
        say(note + "under experiments/, not shown by the leaderboard as the model's", markup=False)
    if clone is not None:
        response = results.submit(out, pub, clone, cfg.results_remote)
        count = response.get("result_count", 0)
        if response.get("status") == "no_changes":
            say(f"submit: {clone} already holds every published result", markup=False)
        else:
            branch = results.current_branch(clone)
            say(f"submit: {count} result file(s) committed to branch {branch} of {clone}; push it "
                f"to your fork (git -C {clone} push FORK {branch}) and open the pull request",
                markup=False)  # fmt: skip
    if cfg.push_to_hub and token:
        url = card.push(cfg.push_to_hub, token, model_folder, model_card.content)
        say(f"pushed {model_folder} and its card to {cfg.push_to_hub}: {url}", markup=False)
    if rerun is not None:
        return _verify(rerun)
    return 0


def _out_problems(out: Path) -> list[str]:
    """Why ``out`` cannot be written in full: not a new (or empty) folder, or its folder (where
    it is staged, then renamed into place) not writable; found without creating anything."""
    from neobench.core.errors import writable_folder_problems

    fix = "Pass a new folder you can write, e.g. --out publish/my-model."
    problems = writable_folder_problems(out, "--out", fix)
    if problems:
        return problems
    if out.exists() and any(out.iterdir()):
        return [f"--out {out}: exists and is not empty; name a new folder."]
    if out.exists():  # empty: staged beside it, then renamed over it
        return writable_folder_problems(out.parent, f"--out {out}: its folder", fix)
    return []


def _table(root: Path, pub) -> tuple[str, bool]:  # noqa: ANN001 (a Publication)
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


def _read_back(out: Path, pub) -> None:  # noqa: ANN001 (a Publication)
    """mteb's ResultCache reads the folder back with the scores the run holds, or this fails."""
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
    say(f"mteb's ResultCache reads {expected} result(s) back with the same scores", markup=False)


def _verify(rerun) -> int:  # noqa: ANN001 (a verify.Rerun)
    from neobench.publish.verify import verify

    checks = verify(rerun)
    for check in checks:
        say(f"verify {check.line()}", markup=False)
    failed = [c for c in checks if not c.within]
    say(f"verify: {len(checks) - len(failed)} of {len(checks)} task(s) within 0.001", markup=False)
    return 1 if failed else 0

"""What `neobench ls` (and the other commands' tabular reports) list, as plain `Listing` records
(a title, column names, rows of strings); how they are printed is the CLI's business."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neobench.protocol.data_check import CheckReport
    from neobench.protocol.mirror import VerifyReport


@dataclass
class Listing:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def plain(self) -> list[str]:
        """The header and rows as plain padded columns, as wide as the widest cell needs (a
        pipe, a log file)."""
        lines = [self.columns, *self.rows]
        widths = [max(len(cell) for cell in column) for column in zip(*lines, strict=True)]
        return [
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in lines
        ]


def listing(what: str, recipe: str, benchmark: str) -> Listing:
    """The listing `neobench ls WHAT` prints (WHAT as in config.LISTINGS)."""
    if what == "tasks":
        return tasks(benchmark)
    if what == "profiles":
        return profiles()
    if what == "recipes":
        return recipes()
    if what == "keys":
        return keys(recipe)
    if what == "datasets":
        return datasets(recipe)
    raise ValueError(f"no listing {what!r}")


def tasks(benchmark: str) -> Listing:
    """The benchmark's tasks with their type, splits, subsets and dataset repo."""
    from neobench.protocol.tasks import load_benchmark

    loaded = load_benchmark(benchmark)
    rows = [
        (
            t.metadata.name,
            t.metadata.type,
            ",".join(t.eval_splits),
            ",".join(t.hf_subsets),
            t.metadata.dataset.get("path", "(aggregate)"),
        )
        for t in loaded.tasks
    ]
    columns = ("task", "type", "splits", "subsets", "dataset")
    return Listing(f"{loaded.name}: {len(loaded.tasks)} tasks", columns, rows)


def profiles() -> Listing:
    """The shipped evaluation instruction profiles."""
    from neobench.protocol.instructions import list_profiles, load_profile

    rows = []
    for name in list_profiles():
        profile = load_profile(name)
        rows.append((name, f"{len(profile.instructions)} instructions", profile.sha256[:12]))
    return Listing("instruction profiles", ("profile", "size", "sha256"), rows)


def recipes() -> Listing:
    """The shipped fine-tuning recipes: what each is for and the evaluation it is compared on."""
    from neobench.protocol.recipe import list_recipes, load_recipe

    rows = []
    for name in list_recipes():
        recipe = load_recipe(name)
        evaluation = recipe.evaluation.describe() if recipe.evaluation else ""
        described = (f"v{recipe.version}", recipe.purpose, evaluation, recipe.manifest)
        rows.append((name, *described, recipe.sha256[:12]))
    columns = ("recipe", "version", "for", "evaluation", "manifest", "sha256")
    return Listing("recipes", columns, rows)


def keys(name: str) -> Listing:
    """Every value of the recipe (what key=value can override) with its source, meaning, note."""
    from neobench.protocol.config import field_docs
    from neobench.protocol.recipe import load_recipe
    from neobench.protocol.recipe_values import RecipeValues

    recipe = load_recipe(name)
    docs = field_docs(RecipeValues)
    rows = [
        (key, str(value), recipe.sources.get(key, ""), docs.get(key, ""), recipe.notes.get(key, ""))
        for key, value in recipe.as_dict().items()
    ]
    title = f"recipe {recipe.name} v{recipe.version}: key=value overrides"
    return Listing(title, ("key", "value", "source", "meaning", "note"), rows)


def datasets(name: str) -> Listing:
    """The training datasets of the recipe's manifest."""
    from neobench.protocol.manifest import load_manifest
    from neobench.protocol.recipe import load_recipe

    manifest = load_manifest(load_recipe(name).manifest)
    rows = [
        (
            row.key,
            row.repo_id,
            row.config or "",
            (row.revision or "lock")[:12],
            row.source,
            ",".join(row.in_domain),
        )
        for row in manifest.rows.values()
    ]
    columns = ("key", "dataset", "config", "revision", "source", "in-domain MTEB tasks")
    return Listing(f"{manifest.name}: {len(manifest.rows)} datasets", columns, rows)


def verified(report: VerifyReport) -> Listing:
    """`data verify`'s rows: one per dataset repo of the mirror."""
    rows = [(r.task, r.repo_id, r.status, r.detail) for r in report.rows]
    return Listing(report.title, ("task", "repo", "status", "detail"), rows)


def checked(report: CheckReport) -> Listing:
    """`data check`'s rows: one per manifest row."""
    rows = [(r.key, r.repo_id, r.revision[:12], r.where, r.status, r.detail) for r in report.rows]
    columns = ("key", "dataset", "revision", "checked on", "status", "detail")
    return Listing(report.title, columns, rows)


def outcomes(summary: Any) -> Listing:
    """`eval`'s closing table: one row per task of the run (an evaluate.EvalSummary)."""
    rows = [
        (o.task, o.type, o.status, "" if o.main_score is None else f"{o.main_score:.4f}")
        for o in summary.outcomes
    ]
    columns = ("task", "type", "status", "main score")
    return Listing(f"{len(summary.outcomes)} tasks", columns, rows)

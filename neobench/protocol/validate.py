"""`neobench validate`: every shipped recipe, manifest and instruction profile, checked offline."""

from __future__ import annotations

from neobench.core.errors import NeobenchError, collect
from neobench.protocol.instructions import (
    all_mteb_task_names,
    list_profiles,
    load_profile,
    load_train_instructions,
    profiles_dir,
    validate_profile,
    yaml_names,
)
from neobench.protocol.manifest import (
    load_manifest,
    manifests_dir,
    pin_problems,
    validate_manifest,
)
from neobench.protocol.recipe import Recipe, list_recipes, load_recipe


def validate_all() -> tuple[str, list[str]]:
    """(what was checked, every problem found)."""
    problems: list[str] = []
    known_tasks = all_mteb_task_names()
    profiles, train = list_profiles(), yaml_names(profiles_dir() / "train")
    manifests, recipes = yaml_names(manifests_dir()), list_recipes()
    for name in profiles:
        profile = collect(problems, load_profile, name)
        if profile:
            problems += validate_profile(profile, known_tasks)
    train_keys: set[str] = set()
    for name in train:
        found = collect(problems, load_train_instructions, name)
        train_keys |= set(found.instructions if found else {})
    for name in manifests:
        manifest = collect(problems, load_manifest, name)
        if manifest:
            problems += validate_manifest(manifest, train_keys)
            problems += pin_problems(manifest)
            for row in manifest.rows.values():
                problems += [
                    f"{manifest.name}: {row.key}: in_domain names unknown mteb task {t!r}."
                    for t in row.in_domain
                    if t not in known_tasks
                ]
    for name in recipes:
        recipe = collect(problems, load_recipe, name)
        if recipe:
            problems += shipped_recipe_problems(recipe)
    checked = (
        f"{len(recipes)} recipe(s), {len(manifests)} manifest(s), {len(profiles)} evaluation and "
        f"{len(train)} training instruction profile(s)"
    )
    return checked, problems


def shipped_recipe_problems(recipe: Recipe) -> list[str]:
    """A shipped recipe names a shipped manifest, says what it is for, and names the evaluation
    it is compared on: a known benchmark and, if given, tasks of that benchmark."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    where = f"recipe {recipe.name}"
    problems = []
    if recipe.manifest not in yaml_names(manifests_dir()):
        problems.append(f"{where}: manifest {recipe.manifest!r} is not shipped.")
    if not recipe.purpose:
        problems.append(f"{where}: add 'purpose', one sentence saying what the recipe is for.")
    if recipe.evaluation is None:
        problems.append(
            f"{where}: add 'evaluation' ({{benchmark: ..., tasks: [...]}}), the evaluation its "
            "results are compared on."
        )
        return problems
    try:
        select_tasks(load_benchmark(recipe.evaluation.benchmark), recipe.evaluation.tasks)
    except NeobenchError as error:
        problems += [f"{where}: evaluation: {p}" for p in error.problems]
    return problems

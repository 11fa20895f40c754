"""The model card of a published fine-tune (huggingface_hub's ModelCard): front matter from
sentence-transformers' and mteb's metadata (library_name, base_model, datasets, tags, and the
`model-index` of its MTEB results through mteb's TaskResult.get_hf_eval_results), a body with the
recipe, the seeds, the scores with their intervals beside the base model, the commands that
reproduce it and the versions that made it; and `--push-to-hub`.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from neobench.core import results
from neobench.core.errors import NeobenchError
from neobench.publishing.results import Member, Publication, hub_id_problem

TAGS = ["sentence-transformers", "sentence-similarity", "feature-extraction", "mteb", "neobench"]


def model_card(pub: Publication, table: str, intervals: bool) -> Any:
    """The card (huggingface_hub.ModelCard) of the pointed seed's model; ``table``: the Markdown
    table of its scores (and the base model's row, when the results hold it), ``intervals``:
    whether the run's row has intervals."""
    from huggingface_hub import ModelCard, ModelCardData
    from mteb.results import TaskResult

    member = pub.pointed
    evals = []
    for path in results.task_files(member.run.folder):
        evals += TaskResult.from_disk(path).get_hf_eval_results()
    tune = member.tune
    data = ModelCardData(
        model_name=pub.name,
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=TAGS,
        base_model=member.meta.adapted_from,
        datasets=_datasets(member) or None,
        eval_results=evals,
    )
    body = "\n".join([f"# {pub.name}", "", *_about(pub, member, intervals), "", *_usage(pub.name),
                      table.strip(), "", *_recipe(tune), *_reproduce(pub, member),
                      *_versions(member)])  # fmt: skip
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}\n")
    check_card(card.content)
    return card


def check_card(text: str) -> None:
    """The card read back by huggingface_hub as the hub reads it: its front matter, and its
    model-index parsed into evaluation results (a malformed one raises there)."""
    from huggingface_hub import ModelCard

    card = ModelCard(text)
    if not card.data.eval_results or card.data.library_name != "sentence-transformers":
        raise NeobenchError("the model card's front matter did not read back (model-index).")


def _datasets(member: Member) -> list[str]:
    """The hub datasets the fine-tune drew from, as its card recorded them."""
    data = member.tune.data if member.tune else {}
    found = {str(entry.get("hf_id")) for entry in data.values() if entry.get("hf_id")}
    return sorted(found)


def _about(pub: Publication, member: Member, intervals: bool) -> list[str]:
    """What the model is, which seed this folder holds, and what the table's cells hold: said
    from what the table has (one run or seeds, intervals or none)."""
    base = member.meta.adapted_from or (member.tune.model.name if member.tune else None)
    revision = f"revision `{member.run.revision}`"
    seeds = len(pub.members)
    if seeds > 1:
        which = (
            f"This folder is seed {member.seed} of seeds {', '.join(map(str, pub.run.seeds))} "
            f"(the seed whose average is the median); its {revision}. The results repository "
            "holds every seed's revision."
        )
        cells = f": each the mean over the {seeds} seeds, with the seeds' standard deviation (sd)"
        interval = (
            " and the 95% interval (±) of a two-level bootstrap over the seeds and each task's "
            "test items (neobench table --ci)."
        )
    else:
        which = f"Its {revision}." if member.seed is None else (
            f"This folder is the fine-tune with seed {member.seed} (one seed); its {revision}."
        )  # fmt: skip
        cells = ""
        interval = (
            ", with the 95% bootstrap interval (±) over each task's test items (neobench table "
            "--ci)."
        )
    if not intervals:
        interval = (
            "; without intervals: the run kept no per-item scores to resample (neobench eval "
            "--no-predictions keeps none)."
        )
    return [
        f"A SentenceTransformer ({member.meta.embed_dim}-dim, mean pooling, up to "
        f"{int(member.meta.max_tokens or 0)} tokens)"
        + (f" fine-tuned from `{base}`" if base else "")
        + " with [neobench](https://pypi.org/project/neobench/)'s fixed recipe and scored on "
        f"{pub.benchmark} under recorded conditions.",
        "",
        f"{which} The scores below are on 0-100{cells}{interval}",
    ]


def _usage(name: str) -> list[str]:
    return [
        "## Usage", "", "```python", "from sentence_transformers import SentenceTransformer", "",
        f'model = SentenceTransformer("{name}")',
        'embeddings = model.encode(["A sentence.", "Another one."])', "```", "",
        "## MTEB scores", "",
    ]  # fmt: skip


def _recipe(tune: Any) -> list[str]:
    if tune is None:
        return []
    recipe = tune.recipe
    values = recipe.get("values") or {}
    rows = [f"| {key} | {_value(entry)} |" for key, entry in values.items()]
    return [
        "", f"## Recipe: {recipe.get('name')} v{recipe.get('version')}", "",
        f"sha256 `{recipe.get('sha256')}`; its values (source in the recipe file):", "",
        "| value | setting |", "|---|---|", *rows, "",
    ]  # fmt: skip


def _value(entry: Any) -> str:
    value = entry.get("value") if isinstance(entry, dict) else entry
    return str(value).replace("|", "\\|")


def _reproduce(pub: Publication, member: Member) -> list[str]:
    """The commands that made each seed's model and its scores, from the cards."""
    lines = ["## Reproduce", "", "```bash"]
    for each in pub.members:
        if each.tune is not None:
            config = each.tune.config or {}
            argv = ["neobench", "finetune", "--model", str(config.get("model")), "--output",
                    str(config.get("output")), "--recipe", str(each.tune.recipe.get("name")),
                    "--seed", str(each.seed), "--model-name", pub.run.model]  # fmt: skip
            if config.get("data_dir"):
                argv += ["--data-dir", str(config["data_dir"])]
            lines.append(shlex.join(argv) + " " + " ".join(map(str, config.get("overrides") or [])))
        config = each.eval_card.config
        tasks = ",".join(p.stem for p in results.task_files(each.run.folder))
        argv = ["neobench", "eval", "--model", each.model_path, "--model-name", pub.run.model,
                "--benchmark", pub.benchmark, "--tasks", tasks]  # fmt: skip
        for flag in ("instructions", "max_seq_length", "dtype"):
            if config.get(flag) is not None:
                argv += [f"--{flag.replace('_', '-')}", str(config[flag])]
        lines.append(shlex.join(argv))
    return [*lines, "```", ""]


def _versions(member: Member) -> list[str]:
    environment = member.eval_card.environment
    packages = ", ".join(f"{k} {v}" for k, v in sorted(environment.packages.items()))
    runtime = member.eval_card.runtime
    where = ", ".join(f"{k} {v}" for k, v in runtime.items() if isinstance(v, str | int))
    return ["## Versions", "", f"Evaluated with {packages}; {where}.", ""]


# ----------------------------------------------------------------------------- --push-to-hub


def check_push(repo: str) -> str:
    """The token to push ``repo`` with, or one clear error before anything is written: offline,
    the hub unreachable, no token, or a repo id that is not org/name."""
    from huggingface_hub import get_token

    from neobench.protocol.mirror import hub_offline, hub_reachable

    why = hub_id_problem(repo)
    if why:
        raise NeobenchError(
            f"--push-to-hub {repo!r}: not a hub repo id, org/name ({why}). Pass org/name in "
            "letters, digits, '-', '_' and '.' (e.g. --push-to-hub my-lab/bert-base-neobench)."
        )
    if hub_offline():
        raise NeobenchError(
            f"--push-to-hub {repo}: HF_HUB_OFFLINE is set; push from a connected machine."
        )
    token = get_token()
    if not token:
        raise NeobenchError(
            f"--push-to-hub {repo}: no Hugging Face token; run `hf auth login` (or set HF_TOKEN)."
        )
    if not hub_reachable():
        raise NeobenchError(
            f"--push-to-hub {repo}: the Hugging Face hub cannot be reached from here; push from "
            "a connected machine."
        )
    return token


def push(repo: str, token: str, model_folder: Path, card_text: str) -> str:
    """The model folder and its card uploaded to ``repo`` (created if new); the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo, repo_type="model", exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo, folder_path=str(model_folder), commit_message="neobench publish",
        ignore_patterns=["checkpoint-*", "checkpoint-*/**", "neobench_*"],
    )  # fmt: skip
    api.upload_file(
        path_or_fileobj=card_text.encode(), path_in_repo="README.md", repo_id=repo,
        commit_message="neobench publish: model card",
    )  # fmt: skip
    return str(commit)


def eval_results_problem(pub: Publication, repo: str) -> str | None:
    """Why mteb's ``.eval_results`` cannot go with the push to ``repo``, or None: mteb uploads
    them to the repo named by the results' model name, and reads only mteb's plain conditions."""
    if repo != pub.name:
        return f"the results are filed under {pub.name}, not {repo} (give --name {repo})"
    if pub.pointed.meta.experiment_kwargs:
        return "the run was evaluated under other conditions than mteb's plain ones"
    return None


def push_eval_results(out: Path, pub: Publication) -> None:
    """mteb's own ``.eval_results`` of the published revision (ModelMeta.push_eval_results: one
    YAML per task, and the benchmark's mean), read from the published folder: what the hub
    shows as the model's evaluation results beside the card's model-index."""
    import mteb

    pub.pointed.meta.push_eval_results(
        tasks=mteb.get_benchmark(pub.benchmark), cache=mteb.ResultCache(out)
    )

"""Which mteb tasks a run covers: a benchmark's own task objects, filtered, then sharded."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError, did_you_mean, unknown

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask
    from mteb.benchmarks.benchmark import Benchmark

logger = logging.getLogger(__name__)


def build_registry() -> None:
    """Build mteb's benchmark registry now: the commands that load torch call this before they
    import it. With torch loaded, each of mteb's ~2,300 task objects seeds torch's lazy CUDA, XPU
    and MTIA generators, formatting a stack trace each time (2.6 s of a process, not 0.4 s)."""
    import mteb

    mteb.get_benchmarks()


def load_benchmark(name: str) -> Benchmark:
    """mteb's benchmark object; its tasks carry the English subset and split filters."""
    import mteb

    try:
        return mteb.get_benchmark(name)
    except (KeyError, ValueError):
        names = [b.name for b in mteb.get_benchmarks()]
        raise NeobenchError(
            unknown("benchmark", name, names, 'Common: "MTEB(eng, v1)", "MTEB(eng, v2)".')
        ) from None


def select_tasks(
    benchmark: Benchmark,
    tasks: list[str] | None = None,
    types: list[str] | None = None,
    *,
    types_flag: str | None = None,
) -> list[AbsTask]:
    """The benchmark's tasks, in its order, restricted to ``tasks`` and ``types`` if given; every
    unknown name at once, a task outside this benchmark too (a bare ``mteb.get_task`` would run
    every language and split). A type given as a task points to ``types_flag`` or its tasks."""
    by_name = {t.metadata.name: t for t in benchmark.tasks}
    known_types = sorted({t.metadata.type for t in benchmark.tasks})
    type_of = {t.lower(): t for t in known_types}  # "sts" is meant as "STS" too
    problems = [
        f"{flag}: the list is empty, so it names nothing to run. Give at least one name, or "
        f"leave {flag} out to run the whole benchmark."
        for flag, names in (("--tasks", tasks), ("--types", types))
        if names is not None and not names
    ]
    for name in tasks or []:
        if name not in by_name and name.lower() in type_of:
            problems.append(_type_as_task(benchmark, name, type_of[name.lower()], types_flag))
        elif name not in by_name:
            problems.append(
                f"Unknown task {name!r} in {benchmark.name}.{did_you_mean(name, by_name)}"
                " List them with: neobench ls tasks --benchmark "
                f"{benchmark.name!r}"
            )
    for type_ in types or []:
        if type_ not in known_types:
            problems.append(
                unknown("task type", type_, known_types, f"(types of {benchmark.name})")
            )
    if problems:
        raise NeobenchError(problems)
    return [
        t
        for t in benchmark.tasks
        if (not tasks or t.metadata.name in tasks) and (not types or t.metadata.type in types)
    ]


def _type_as_task(benchmark: Benchmark, name: str, type_: str, types_flag: str | None) -> str:
    """What to do about a task type given where a task name goes."""
    if types_flag is not None:
        return f"{name} is a task type, not a task: use {types_flag} {type_}"
    its = [t.metadata.name for t in benchmark.tasks if t.metadata.type == type_]
    shown = ", ".join(its[:5]) + (", ..." if len(its) > 5 else "")
    return (
        f"{name} is a task type, not a task: name its tasks instead ({shown}: {len(its)} in "
        f"{benchmark.name}). List them with: neobench ls tasks --benchmark {benchmark.name!r}"
    )


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N) with 1 <= K <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise NeobenchError(f"--shard {text!r}: expected K/N, e.g. --shard 1/4.")
    k, n = int(match[1]), int(match[2])
    if n < 1 or not 1 <= k <= n:
        m = max(n, 1)
        raise NeobenchError(
            f"--shard {text}: K must be between 1 and N (got K={k}, N={n}); "
            f"with N={m} shards use --shard 1/{m} ... --shard {m}/{m}."
        )
    return k, n


# Characters per token of English retrieval text under BERT's WordPiece vocabulary: 4.50 on the
# mirror's SciFact corpus, 5.06 on ArguAna's; the scale rehearsal's recombined corpus, 0.207 tokens
# per character (docs/performance.md). Turns mteb's character counts into tokens.
CHARS_PER_TOKEN = 4.8


def task_cost(task: AbsTask) -> int:
    """Characters mteb's descriptive statistics record for the task's eval splits (a size proxy)."""
    return task_size(task)[0]


def task_size(task: AbsTask) -> tuple[int, int]:
    """(characters, texts) of the task's eval splits, from mteb's descriptive statistics (at
    least 1 each: a task without statistics still costs something)."""
    subtasks = getattr(task, "tasks", None)
    if subtasks:
        sizes = [task_size(t) for t in subtasks]
        return sum(c for c, _ in sizes), sum(n for _, n in sizes)
    stats = task.metadata.descriptive_stats or {}
    chars = texts = 0
    for split in task.eval_splits:
        split_stats = stats.get(split) or {}
        samples = int(split_stats.get("num_samples") or 1)
        chars += int(split_stats.get("number_of_characters") or samples)
        texts += samples
    return max(chars, 1), max(texts, 1)


def task_tokens(task: AbsTask, max_length: int) -> tuple[int, float]:
    """(texts, mean tokens per text) of the task's eval splits: mteb's characters at
    CHARS_PER_TOKEN, a text's two special tokens, cut at ``max_length``."""
    chars, texts = task_size(task)
    return texts, max(1.0, min(chars / texts / CHARS_PER_TOKEN + 2, max_length))


@dataclass(frozen=True)
class TextLengths:
    """Characters of one side of a retrieval task's eval split, as mteb's statistics give them."""

    count: int
    mean: float
    low: int
    high: int


# The retrieval task whose queries and passages stand for the fine-tuning recipe's texts (their
# lengths: a study's estimate and `bench gpu`'s recipe-shape train rows).
RECIPE_TEXT_LENGTHS = "MSMARCO"


def retrieval_lengths(name: str) -> tuple[TextLengths, TextLengths]:
    """(documents, queries) of the retrieval task ``name``'s first eval split."""
    import mteb

    task = mteb.get_task(name)
    stats = (task.metadata.descriptive_stats or {})[task.eval_splits[0]]
    sides = []
    for side in ("documents", "queries"):
        text = stats[f"{side}_text_statistics"]
        sides.append(
            TextLengths(
                int(stats[f"num_{side}"]),
                float(text["average_text_length"]),
                int(text["min_text_length"]),
                int(text["max_text_length"]),
            )
        )
    return sides[0], sides[1]


def shard(tasks: list[AbsTask], k: int, n: int) -> list[AbsTask]:
    """Tasks of shard K of N, balanced by size: largest task first to the least-loaded shard, ties
    broken by name and shard index, so N processes (Slurm array jobs) agree without talking. The
    N shards partition the task list."""
    if n == 1:
        return list(tasks)
    loads = [0] * n
    owner: dict[str, int] = {}
    for task in sorted(tasks, key=lambda t: (-task_cost(t), t.metadata.name)):
        index = min(range(n), key=lambda i: (loads[i], i))
        owner[task.metadata.name] = index
        loads[index] += task_cost(task)
    return [t for t in tasks if owner[t.metadata.name] == k - 1]

"""The `neobench` command: parse flags, build a config, call one library function, render it.

Only this module decides how output looks (rich); library code logs.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import warnings
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from neobench import __version__
from neobench.errors import NeobenchError
from neobench.progress import EvalProgress, StepProgress

console = Console(stderr=True)
out = Console()

EVAL_EXAMPLE = """example (offline, on a mirror):
  neobench eval --model sentence-transformers/all-MiniLM-L6-v2 --tasks STSBenchmark,BIOSSES \\
      --data-dir /data/mteb-mirror --results runs/eval
  neobench eval --model runs/my-finetuned-model --shard 2/8    # job 2 of 8

Results land in <results>/results/<org__model>/<revision>/<Task>.json (mteb's layout; read them
with mteb.ResultCache(<results>).load_results()). Runs under non-standard conditions (another
instruction profile or max length) go to .../<revision>/experiments/<conditions>/ (read them with
load_results(load_experiments="match_name")). Finished tasks are skipped on a re-run."""

PREFETCH_EXAMPLE = """example (on a machine with hub access):
  neobench data prefetch --benchmark "MTEB(eng, v1)" --out /data/mteb-mirror
then copy /data/mteb-mirror to the air-gapped machine and pass --data-dir /data/mteb-mirror."""

VERIFY_EXAMPLE = """example (offline):
  neobench data verify /data/mteb-mirror --benchmark "MTEB(eng, v1)" --tasks SciFact,STS12"""

LS_EXAMPLE = """examples:
  neobench ls tasks --benchmark "MTEB(eng, v2)"
  neobench ls profiles
  neobench ls recipes
  neobench ls keys --recipe neobert-mteb-2k      # every recipe value, its source and note
  neobench ls datasets --recipe neobert-mteb-2k"""

MAIN_EXAMPLE = """examples:
  neobench eval --model sentence-transformers/all-MiniLM-L6-v2 --tasks STSBenchmark --data-dir DIR
  neobench data verify DIR --benchmark "MTEB(eng, v1)"
  neobench ls tasks
Each command has --help with an example."""

DATA_EXAMPLE = PREFETCH_EXAMPLE + "\n" + VERIFY_EXAMPLE

FINETUNE_EXAMPLE = """examples:
  neobench finetune --model chandar-lab/NeoBERT --output runs/neobert-2k
  neobench finetune --model runs/base --data-dir /data/mirror --output runs/sts \\
      datasets=STSBENCHMARK max_steps=10 batch_size=16
  torchrun --nproc_per_node 8 -m neobench finetune --model BAAI/bge-base-en-v1.5 --output runs/bge
  neobench finetune --model ... --output runs/neobert-2k --resume   # from the last checkpoint
Overrides (key=value) change recipe values; they are recorded and change the recipe hash."""

BENCH_EXAMPLE = """example (offline, on the mirror):
  neobench bench encode --data-dir ../shared/data/hub --tasks SciFact,STSBenchmark"""

CACHE_EXAMPLE = """examples:
  neobench cache info     # embeddings stored, bytes on disk, full integrity check (exit 1: damaged)
  neobench cache clear    # delete the cache files (also damaged ones) and start an empty cache"""

TABLE_EXAMPLE = """examples:
  neobench table --results runs/eval --reference paper
  neobench table --results runs/eval --models sentence-transformers/all-MiniLM-L6-v2 --format md \\
      --out table.md --plot table.png
  neobench table --results runs/eval --per-task --format csv --out per_task.csv --strict"""

VALIDATE_EXAMPLE = """example:
  neobench validate    # every shipped recipe, manifest and instruction profile, offline"""


def _csv(text: str | None) -> list[str] | None:
    """Comma-separated names; None when the flag was not given. A given but empty value
    (``--tasks ""``, ``--tasks ,``) is an empty list, which the commands refuse rather than
    reading it as "everything"."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _model_and_data_args(parser: argparse.ArgumentParser) -> None:
    """The flags `eval` and `finetune` share, defined once so they read the same in both."""
    parser.add_argument(
        "--model", required=True, help="hub id, HF model folder, or SentenceTransformer folder"
    )
    parser.add_argument(
        "--data-dir",
        help="offline mirror <dir>/<hf repo id>/ (default: $NEOBENCH_DATA_DIR, else the hub)",
    )
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow model code from the model repository (off by default)",
    )
    parser.add_argument(
        "--attn-implementation",
        default="auto",
        help="auto (default: the fastest the backbone supports: flash_attention_2 on CUDA in half "
        "precision, else sdpa, else eager) | eager | sdpa | flash_attention_2 | flex_attention",
    )


def _speed_args(parser: argparse.ArgumentParser) -> None:
    """How the evaluation encoder runs: autocast dtype and unpadded attention."""
    parser.add_argument(
        "--dtype",
        default="auto",
        help="auto (float16 autocast on CUDA, float32 elsewhere) | float32 | float16 | bfloat16",
    )
    parser.add_argument(
        "--unpadded",
        default="auto",
        help="variable-length attention on real tokens only: auto (on CUDA) | on | off",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neobench",
        description="Fine-tune and evaluate text encoders under one recorded protocol.",
        epilog=MAIN_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"neobench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log library details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fmt = argparse.RawDescriptionHelpFormatter

    ev = sub.add_parser(
        "eval", help="evaluate an encoder on MTEB", epilog=EVAL_EXAMPLE, formatter_class=fmt
    )
    _model_and_data_args(ev)
    ev.add_argument(
        "--model-name",
        help="name under which results are stored (default: hub id or local/<folder>)",
    )
    ev.add_argument(
        "--revision", help="hub revision to load (default: the branch head, recorded as its commit)"
    )
    ev.add_argument(
        "--benchmark", default="MTEB(eng, v1)", help='mteb benchmark (default "MTEB(eng, v1)")'
    )
    ev.add_argument("--tasks", help="comma-separated task names of the benchmark")
    ev.add_argument("--types", help="comma-separated task types, e.g. STS,Retrieval")
    ev.add_argument(
        "--instructions", default="paper", help="paper (default) | authors-code | none | FILE.yaml"
    )
    ev.add_argument(
        "--results", default=".", help="results root (mteb ResultCache path; default: .)"
    )
    ev.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="texts per mteb data-loader batch (default 32); forward batches follow --token-budget",
    )
    ev.add_argument(
        "--max-seq-length",
        default="512",
        help="tokens (default 512), or 'model' to keep the folder's own",
    )
    ev.add_argument("--shard", default="1/1", help="K/N: run the K-th of N disjoint task shards")
    ev.add_argument(
        "--cache-dir", help="embedding cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)"
    )
    ev.add_argument("--no-cache", action="store_true", help="encode everything, store nothing")
    ev.add_argument(
        "--token-budget",
        type=int,
        help="padded tokens per forward batch (default 2048 on CPU, 32768 on CUDA)",
    )
    _speed_args(ev)

    bench = sub.add_parser("bench", help="throughput measurements")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="WHAT")
    enc = bench_sub.add_parser(
        "encode",
        help="encoding tokens/s of neobench's encoder vs stock encode",
        epilog=BENCH_EXAMPLE,
        formatter_class=fmt,
    )
    enc.add_argument("--model", help="model (default: the packaged all-MiniLM-L6-v2)")
    enc.add_argument(
        "--tasks", default="SciFact,STSBenchmark", help="tasks whose texts are encoded"
    )
    enc.add_argument("--benchmark", default="MTEB(eng, v1)")
    enc.add_argument(
        "--data-dir", help="offline mirror (default: $NEOBENCH_DATA_DIR, else the hub)"
    )
    enc.add_argument("--max-texts", type=int, default=4000)
    enc.add_argument("--device", default="auto")
    enc.add_argument("--batch-size", type=int, default=32, help="stock encode's batch size")
    enc.add_argument("--max-seq-length", default="512")
    enc.add_argument("--token-budget", type=int)
    _speed_args(enc)

    cache = sub.add_parser(
        "cache",
        help="the shared embedding cache: size, clear",
        epilog=CACHE_EXAMPLE,
        formatter_class=fmt,
    )
    cache.add_argument("action", choices=["info", "clear"])
    cache.add_argument(
        "--cache-dir", help="cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)"
    )

    data = sub.add_parser(
        "data", help="offline mirror: prefetch and verify", epilog=DATA_EXAMPLE, formatter_class=fmt
    )
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    pre = data_sub.add_parser(
        "prefetch",
        help="snapshot the benchmark's datasets at mteb's pinned revisions",
        epilog=PREFETCH_EXAMPLE,
        formatter_class=fmt,
    )
    pre.add_argument("--benchmark", default="MTEB(eng, v1)")
    pre.add_argument("--tasks", help="comma-separated subset of the benchmark's tasks")
    pre.add_argument("--out", required=True, help="mirror folder to create or complete")
    pre.add_argument("--recipe", help="also every training dataset of this recipe's manifest")
    ver = data_sub.add_parser(
        "verify",
        help="offline: which tasks are present, missing, and loadable",
        epilog=VERIFY_EXAMPLE,
        formatter_class=fmt,
    )
    ver.add_argument("dir", help="mirror folder")
    ver.add_argument(
        "--recipe", help="check this recipe's training datasets instead of a benchmark"
    )
    ver.add_argument("--benchmark", default="MTEB(eng, v1)")
    ver.add_argument("--tasks", help="comma-separated subset of the benchmark's tasks")
    ver.add_argument(
        "--no-load", action="store_true", help="check folders only, do not load the data"
    )

    ft = sub.add_parser(
        "finetune",
        help="fine-tune an encoder with the standard recipe",
        epilog=FINETUNE_EXAMPLE,
        formatter_class=fmt,
    )
    _model_and_data_args(ft)
    ft.add_argument(
        "--output", required=True, help="new folder for the fine-tuned SentenceTransformer"
    )
    ft.add_argument("--recipe", default="neobert-mteb-2k", help="recipe name or YAML file")
    ft.add_argument("--seed", type=int, help="overrides the recipe's seed")
    ft.add_argument(
        "--resume", action="store_true", help="continue from the last checkpoint in --output"
    )
    ft.add_argument("--model-name", help="name recorded for the fine-tuned model")
    ft.add_argument(
        "overrides", nargs="*", metavar="key=value", help="recipe overrides, e.g. max_steps=40"
    )

    tab = sub.add_parser(
        "table",
        help="leaderboard table of evaluated models",
        epilog=TABLE_EXAMPLE,
        formatter_class=fmt,
    )
    tab.add_argument(
        "--results",
        action="append",
        help="results root given to neobench eval (default .); repeat to combine several",
    )
    tab.add_argument("--models", help="comma-separated model names or row labels (default: all)")
    tab.add_argument("--benchmark", default="MTEB(eng, v1)")
    tab.add_argument(
        "--format",
        choices=["rich", "md", "csv", "latex"],
        help="output format (default: rich, or from the --out suffix)",
    )
    tab.add_argument("--out", help="write the table to this file (.md, .csv, .tex)")
    tab.add_argument("--reference", help="add published rows: paper (NeoBERT Table 4)")
    tab.add_argument("--per-task", action="store_true", help="one column per task")
    tab.add_argument("--plot", help="also write a PNG bar chart of per-type scores")
    tab.add_argument(
        "--strict", action="store_true", help="refuse rows produced under different conditions"
    )

    ls = sub.add_parser(
        "ls",
        help="list benchmarks' tasks or instruction profiles",
        epilog=LS_EXAMPLE,
        formatter_class=fmt,
    )
    ls.add_argument("what", choices=["tasks", "profiles", "recipes", "keys", "datasets"])
    ls.add_argument("--recipe", default="neobert-mteb-2k", help="for `ls keys` and `ls datasets`")
    ls.add_argument("--benchmark", default="MTEB(eng, v1)")

    sub.add_parser(
        "validate",
        help="check every shipped recipe, manifest and instruction profile offline",
        epilog=VALIDATE_EXAMPLE,
        formatter_class=fmt,
    )
    return parser


def cmd_eval(args: argparse.Namespace) -> int:
    from neobench.evaluate import EvalConfig, run_eval

    cfg = EvalConfig(
        model=args.model,
        benchmark=args.benchmark,
        tasks=_csv(args.tasks),
        types=_csv(args.types),
        instructions=args.instructions,
        data_dir=args.data_dir,
        results=args.results,
        batch_size=args.batch_size,
        device=args.device,
        max_seq_length=args.max_seq_length,
        shard=args.shard,
        trust_remote_code=args.trust_remote_code,
        model_name=args.model_name,
        revision=args.revision,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
        token_budget=args.token_budget,
        dtype=args.dtype,
        unpadded=args.unpadded,
        attn_implementation=args.attn_implementation,
    )
    reporter = EvalProgress(console)
    try:
        summary = run_eval(cfg, reporter)
    finally:
        reporter.stop()
    table = Table(title=f"{len(summary.outcomes)} tasks")
    for column in ("task", "type", "status", "main score"):
        table.add_column(column, justify="right" if column == "main score" else "left")
    for o in summary.outcomes:
        table.add_row(
            o.task, o.type, o.status, "" if o.main_score is None else f"{o.main_score:.4f}"
        )
    out.print(table)
    if summary.run_card:
        console.print(f"run card: {summary.run_card}", soft_wrap=True, highlight=False)
    if summary.texts_requested:
        console.print(
            f"texts: {summary.texts_requested} requested, {summary.texts_encoded} encoded, "
            f"{summary.texts_requested - summary.texts_encoded} from the embedding cache"
        )
    if summary.failed:
        console.print(
            f"[red]{len(summary.failed)} task(s) failed[/]; re-run the same command to retry them."
        )
        return 1
    return 0


def _tasks_for(benchmark: str, tasks: str | None) -> list:
    import copy

    from neobench.tasks import load_benchmark, select_tasks

    return [copy.deepcopy(t) for t in select_tasks(load_benchmark(benchmark), _csv(tasks))]


def cmd_data(args: argparse.Namespace) -> int:
    from neobench import mirror

    recipe_rows = _recipe_rows(args.recipe) if args.recipe else None
    if args.data_command == "prefetch":
        tasks = _tasks_for(args.benchmark, args.tasks)
        needs = mirror.repo_needs(tasks) + mirror.manifest_needs(recipe_rows or [])
        lock = mirror.prefetch(needs, Path(args.out))
        console.print(f"{len(lock)} dataset repos in {args.out} (lock: {mirror.LOCK_FILE})")
        return 0
    data_dir = Path(args.dir)
    if not data_dir.is_dir():
        raise NeobenchError(f"{data_dir}: no such mirror folder.")
    if recipe_rows is not None:
        recipe = recipe_rows[0]
        rows = mirror.verify_manifest(
            recipe_rows[1], data_dir, recipe["max_hard_negatives"], load=not args.no_load
        )
        return _verify_report(
            rows,
            f"mirror {data_dir} vs recipe {recipe.name}",
            f"neobench data prefetch --recipe {recipe.name} --out {data_dir}",
        )
    tasks = _tasks_for(args.benchmark, args.tasks)
    rows = mirror.verify(tasks, data_dir, load=not args.no_load)
    missing = sorted({r.benchmark_task for r in rows if r.status == "missing"})
    if len(missing) == len({r.benchmark_task for r in rows}):
        missing = []  # every task: the command needs no --tasks
    return _verify_report(
        rows,
        f"mirror {data_dir} vs {args.benchmark}",
        mirror.prefetch_command(args.benchmark, missing, data_dir),
    )


def _recipe_rows(name: str) -> tuple:
    from neobench.manifest import load_manifest
    from neobench.recipe import load_recipe

    recipe = load_recipe(name)
    return recipe, list(load_manifest(recipe.manifest).rows.values())


def _verify_report(rows: list, title: str, fix: str) -> int:
    table = Table(title=title)
    for column in ("task", "repo", "status", "detail"):
        table.add_column(column)
    colors = {
        "ok": "green",
        "present": "green",
        "missing": "red",
        "load-failed": "red",
        "other-revision": "yellow",
    }
    for r in rows:
        table.add_row(r.task, r.repo_id, f"[{colors[r.status]}]{r.status}[/]", r.detail)
    out.print(table)
    bad = [r for r in rows if r.status not in {"ok", "present"}]
    counts = {s: sum(r.status == s for r in rows) for s in dict.fromkeys(r.status for r in rows)}
    console.print(", ".join(f"{v} {k}" for k, v in counts.items()))
    if bad:
        if any(r.status == "missing" for r in rows):
            console.print(f"to complete it, on a connected machine: {fix}")
        return 1
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    from neobench.finetune import FinetuneConfig, finetune

    cfg = FinetuneConfig(
        model=args.model,
        output=args.output,
        recipe=args.recipe,
        overrides=args.overrides,
        data_dir=args.data_dir,
        seed=args.seed,
        resume=args.resume,
        device=args.device,
        trust_remote_code=args.trust_remote_code,
        model_name=args.model_name,
        attn_implementation=args.attn_implementation,
    )
    progress = StepProgress(console)
    try:
        summary = finetune(cfg, on_step=progress)
    finally:
        progress.stop()
    loss = "n/a" if summary.final_loss is None else f"{summary.final_loss:.4f}"
    console.print(
        f"[green]done[/]: {summary.steps} steps, final loss {loss}, recipe sha256 "
        f"{summary.recipe_sha256[:12]}. Model: {summary.output}",
        soft_wrap=True,
        highlight=False,
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from neobench import bench
    from neobench.encode import DTYPE_ALIASES, DTYPES
    from neobench.errors import check_choice, collect
    from neobench.model import parse_max_seq_length

    problems: list[str] = []
    collect(problems, check_choice, "--dtype", args.dtype, ["auto", *DTYPES, *DTYPE_ALIASES])
    collect(problems, check_choice, "--unpadded", args.unpadded, ["auto", "on", "off"])
    for flag, value in (
        ("--token-budget", args.token_budget),
        ("--max-texts", args.max_texts),
        ("--batch-size", args.batch_size),
    ):
        if value is not None and value < 1:
            problems.append(f"{flag} {value}: must be a positive number.")
    if not _csv(args.tasks):
        problems.append("--tasks: the list is empty; name the tasks whose texts are encoded.")
    if problems:
        raise NeobenchError(problems)
    texts = bench.task_texts(_csv(args.tasks) or [], args.benchmark, args.data_dir, args.max_texts)
    rates = bench.compare(
        args.model or bench.default_model(),
        texts,
        device=args.device,
        batch_size=args.batch_size,
        max_seq_length=parse_max_seq_length(args.max_seq_length),
        token_budget=args.token_budget,
        dtype=args.dtype,
        unpadded=args.unpadded,
    )
    where = bench.describe_device(args.device, args.dtype, rates.packed)
    out.print(bench.report(rates.rates, where), highlight=False)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from neobench.cache import cache_path, clear_cache, inspect_cache

    path = cache_path(args.cache_dir)
    if args.action == "clear":
        for line in clear_cache(path):
            console.print(line, highlight=False)
    report = inspect_cache(path)
    if report.state == "missing":
        console.print(f"{path}: no cache yet (neobench eval creates it)", highlight=False)
    elif report.state == "ok":
        console.print(
            f"{path}: {report.embeddings} embeddings, {report.bytes / 1e6:.1f} MB, checked ok",
            highlight=False,
        )
    else:
        console.print(f"[bold red]{report.state}:[/] {path}: {report.problem}", highlight=False)
        if report.fix:
            console.print(f"fix: {report.fix}", highlight=False)
    if report.aside:
        size = sum(p.stat().st_size for p in report.aside) / 1e6
        console.print(
            f"{len(report.aside)} damaged or outdated cache(s) moved aside, {size:.1f} MB: "
            + ", ".join(p.name for p in report.aside)
            + " (neobench cache clear deletes them)",
            highlight=False,
        )
    return 0 if report.state in ("missing", "ok") else 1


def cmd_table(args: argparse.Namespace) -> int:
    from neobench import table as tables
    from neobench.record import write_text_atomic
    from neobench.results import load_runs
    from neobench.tasks import load_benchmark, select_tasks

    suffixes = {".md": "md", ".csv": "csv", ".tex": "latex"}
    fmt = args.format or (suffixes.get(Path(args.out).suffix) if args.out else None) or "rich"
    if args.out and fmt == "rich":
        raise NeobenchError(
            f"--out {args.out}: choose --format md, csv or latex (or a .md/.csv/.tex name)."
        )
    if args.plot and Path(args.plot).suffix.lower() != ".png":
        raise NeobenchError(f"--plot {args.plot}: the chart is written as PNG; name it *.png.")
    from neobench.errors import writable_folder_problems

    problems = [
        problem
        for flag, target in (("--out", args.out), ("--plot", args.plot))
        if target
        for problem in writable_folder_problems(
            Path(target).parent, f"{flag} {target}: its folder", "Write it somewhere else."
        )
    ]
    if problems:
        raise NeobenchError(problems)
    benchmark = load_benchmark(args.benchmark)
    tasks = select_tasks(benchmark)
    runs, problems = [], []
    for root in args.results or ["."]:
        found, trouble = load_runs(Path(root), tasks)
        runs += found
        problems += trouble
    for problem in problems:
        console.print(f"[yellow]skipped:[/] {problem}", highlight=False)
    table = tables.build_table(
        runs,
        tasks,
        benchmark.name,
        models=_csv(args.models),
        reference=args.reference,
        per_task=args.per_task,
        strict=args.strict,
        problems=problems,
    )
    render = {"md": tables.to_markdown, "csv": tables.to_csv, "latex": tables.to_latex}
    if fmt == "rich":
        # Piped output (logs, CI) would otherwise be cut to 80 columns.
        Console(width=None if sys.stdout.isatty() else 220).print(tables.to_rich(table))
    elif args.out:
        replaced = Path(args.out).exists()
        write_text_atomic(Path(args.out), render[fmt](table))
        console.print(f"{'replaced' if replaced else 'wrote'} {args.out}")
    else:
        out.print(render[fmt](table), markup=False, highlight=False, soft_wrap=True)
    if args.plot:
        tables.plot(table, Path(args.plot))
        console.print(f"wrote {args.plot}")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    if args.what == "keys":
        from neobench.recipe import load_recipe

        recipe = load_recipe(args.recipe)
        table = Table(title=f"recipe {recipe.name} v{recipe.version}: key=value overrides")
        for column in ("key", "value", "source", "note"):
            table.add_column(column, overflow="fold")
        for key, value in recipe.values.items():
            table.add_row(key, str(value), recipe.sources.get(key, ""), recipe.notes.get(key, ""))
        out.print(table)
        return 0
    if args.what in ("recipes", "datasets"):
        from neobench.manifest import load_manifest
        from neobench.recipe import list_recipes, load_recipe

        if args.what == "recipes":
            for name in list_recipes():
                recipe = load_recipe(name)
                out.print(
                    f"{name:<20} v{recipe.version}  manifest {recipe.manifest}  "
                    f"sha256 {recipe.sha256[:12]}"
                )
            return 0
        manifest = load_manifest(load_recipe(args.recipe).manifest)
        table = Table(title=f"{manifest.name}: {len(manifest.rows)} datasets")
        for column in ("key", "dataset", "config", "revision", "source", "in-domain MTEB tasks"):
            table.add_column(column)
        for row in manifest.rows.values():
            table.add_row(
                row.key,
                row.repo_id,
                row.config or "",
                (row.revision or "lock")[:12],
                row.source,
                ",".join(row.in_domain),
            )
        out.print(table)
        return 0
    if args.what == "profiles":
        from neobench.instructions import list_profiles, load_profile

        for name in list_profiles():
            profile = load_profile(name)
            out.print(
                f"{name:<14} {len(profile.instructions):>3} instructions"
                f"  sha256 {profile.sha256[:12]}"
            )
        return 0
    from neobench.tasks import load_benchmark

    benchmark = load_benchmark(args.benchmark)
    table = Table(title=f"{benchmark.name}: {len(benchmark.tasks)} tasks")
    for column in ("task", "type", "splits", "subsets", "dataset"):
        table.add_column(column)
    for t in benchmark.tasks:
        table.add_row(
            t.metadata.name,
            t.metadata.type,
            ",".join(t.eval_splits),
            ",".join(t.hf_subsets),
            t.metadata.dataset.get("path", "(aggregate)"),
        )
    out.print(table)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from neobench.validate import validate_all

    checked, problems = validate_all()
    if problems:
        raise NeobenchError(problems)
    console.print(f"[green]ok[/]: {checked}")
    return 0


def _silence_tqdm() -> None:
    """Library progress bars (mteb's scorers, model-card writing) would interleave with rich's.

    tqdm reads TQDM_DISABLE when it is imported, which `import neobench` (through transformers)
    already did, so the CLI turns the default off on the class itself.
    """
    import functools

    import tqdm
    import tqdm.auto

    for cls in {tqdm.tqdm, tqdm.auto.tqdm}:
        cls.__init__ = functools.partialmethod(cls.__init__, disable=True)


def _quiet_libraries(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(console=console)])
    for name in (
        "mteb",
        "sentence_transformers",
        "datasets",
        "transformers",
        "huggingface_hub",
        "httpx",
    ):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    if not verbose:
        warnings.filterwarnings("ignore")
        # Before the libraries import tqdm: the bars of model-card and weight writing.
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
        _silence_tqdm()


COMMANDS = {
    "eval": cmd_eval,
    "finetune": cmd_finetune,
    "cache": cmd_cache,
    "bench": cmd_bench,
    "table": cmd_table,
    "data": cmd_data,
    "ls": cmd_ls,
    "validate": cmd_validate,
}


def _os_error_message(error: OSError) -> str:
    from neobench.errors import disk_full

    filename = str(error.filename or "")
    # write_text_atomic's temporary name: the user knows the file it stands for.
    filename = re.sub(r"\.\d+\.tmp$", "", filename)
    where = f"{filename}: " if filename else ""
    if disk_full(error):
        return f"{where}the disk is full. Free space or write to another disk, then re-run."
    reason = error.strerror or str(error)
    return f"{where}{reason}. Check the path and its permissions, then re-run."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line. ``finetune`` takes key=value overrides anywhere after the
    command word, also between options (argparse alone stops at the first option)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "finetune":
        stray = [item for item in extra if item.startswith("-") or "=" not in item]
        if stray:
            parser.error(f"unrecognized arguments: {' '.join(stray)}")
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _quiet_libraries(args.verbose)
    try:
        return COMMANDS[args.command](args)
    except NeobenchError as error:
        for problem in error.problems:
            console.print(f"[bold red]error:[/] {problem}", highlight=False, soft_wrap=True)
        return error.exit_code
    except OSError as error:
        # The last guard for a file-system failure no check foresaw: one line that names the
        # path, not a traceback (-v logs the traceback).
        logging.getLogger(__name__).debug("unexpected OS error", exc_info=True)
        console.print(
            f"[bold red]error:[/] {_os_error_message(error)}", highlight=False, soft_wrap=True
        )
        return 1
    except KeyboardInterrupt:
        console.print("interrupted: finished tasks are saved; re-run the same command to resume.")
        return 130


if __name__ == "__main__":
    sys.exit(main())

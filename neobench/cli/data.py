"""The commands about what is on disk: `ls`, `validate`, `data prefetch`/`verify` (the offline
mirror), `data check` (a manifest against its data) and `cache` (the shared embedding cache)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from neobench.cli import commands
from neobench.cli.output import print_listing, say
from neobench.core.errors import NeobenchError
from neobench.protocol import listing

if TYPE_CHECKING:
    from neobench.encoder.cache import CacheReport


def cmd_ls(cfg: commands.LsCommand) -> int:
    """list tasks, profiles, recipes, keys or datasets"""
    print_listing(listing.listing(cfg.what, cfg.recipe, cfg.benchmark))
    return 0


def cmd_validate(cfg: None) -> int:
    """check every shipped recipe, manifest and instruction profile offline"""
    from neobench.protocol.validate import validate_all

    checked, problems = validate_all()
    if problems:
        raise NeobenchError(problems)
    say(f"[green]ok[/]: {checked}")
    return 0


def cmd_prefetch(cfg: commands.PrefetchCommand) -> int:
    """snapshot the benchmark's datasets at mteb's pinned revisions"""
    from neobench.protocol import mirror

    lock = mirror.prefetch_mirror(cfg.benchmark, cfg.tasks, cfg.out, cfg.recipe)
    say(f"{len(lock)} dataset repos in {cfg.out} (lock: {mirror.LOCK_FILE})", markup=False)
    return 0


def cmd_verify(cfg: commands.VerifyCommand) -> int:
    """offline: which tasks are present, missing, and loadable"""
    from neobench.protocol import mirror

    report = mirror.verify_mirror(cfg.dir, cfg.benchmark, cfg.tasks, cfg.recipe, not cfg.no_load)
    print_listing(listing.verified(report))
    say(", ".join(f"{n} {status}" for status, n in report.counts.items()))
    if report.missing:
        say(f"to complete it, on a connected machine: {report.fix}", markup=False)
    return 0 if report.ok else 1


# `data check`'s closing count: rows per status.
CHECKED = {"problem": "with problems"}


def cmd_check(cfg: commands.DataCheckCommand) -> int:
    """check a manifest's rows against their data: revision, config, split, columns, negatives"""
    from neobench.protocol.data_check import check_manifest

    report = check_manifest(cfg.manifest, cfg.data_dir, cfg.recipe)
    print_listing(listing.checked(report))
    counts = report.counts
    say(", ".join(f"{n} {CHECKED.get(s, s)}" for s, n in counts.items()), markup=False)
    unchecked = counts.get("not checked")
    if unchecked:
        say(
            f"{unchecked} row(s) not checked (not a failure; the detail says why). To check them: "
            f"{report.fix_unchecked}.",
            markup=False,
        )
    if report.problems:
        raise NeobenchError(report.problems)
    return 0


def cache_settings_line(report: CacheReport) -> str:
    """Held bytes against the file, and the last run's policy and cap."""
    held = (
        f"database {report.held / 1e6:.1f} MB of the file's {report.bytes / 1e6:.1f} MB (the rest: "
        "free pages reused by later inserts, and the -wal)"
    )
    settings = report.settings
    if not settings:
        return f"{held}; no run has set a policy or cap yet"
    cap = settings.get("max_bytes") or ""
    cap_text = f"cap {int(cap) / 1e9:g} GB" if cap else "no cap"
    return (
        f"{held}; last run ({settings.get('set_at', '?')}): policy {settings.get('policy')}, "
        f"{cap_text}"
    )


def cmd_cache(cfg: commands.CacheCommand) -> int:
    """the shared embedding cache: size, clear"""
    from neobench.encoder.cache import cache_command

    report = cache_command(cfg.cache_dir, cfg.action)
    for line in report.cleared:
        say(line, markup=False)
    if report.state == "missing":
        say(f"{report.path}: no cache yet (neobench eval creates it)", markup=False)
    elif report.ok:
        size = f"{report.embeddings} embeddings, {report.bytes / 1e6:.1f} MB, checked ok"
        say(f"{report.path}: {size}", markup=False)
        say(cache_settings_line(report), markup=False)
    else:
        say(f"[bold red]{report.state}:[/] {escape(f'{report.path}: {report.problem}')}")
        if report.fix:
            say(f"fix: {report.fix}", markup=False)
    if report.aside:
        names = ", ".join(p.name for p in report.aside)
        say(
            f"{len(report.aside)} damaged or outdated cache(s) moved aside, "
            f"{report.aside_mb:.1f} MB: {names} (neobench cache clear deletes them)",
            markup=False,
        )
    return 0 if report.ok else 1

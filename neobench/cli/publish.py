"""`neobench publish`: parse, `run_publish` (neobench/publishing/run.py), print its lines."""

from __future__ import annotations

from neobench.cli.output import say
from neobench.publishing.config import PublishCommand


def cmd_publish(cfg: PublishCommand) -> int:
    """one run in the MTEB results repository's layout with its model card; submit, push, verify"""
    from neobench.publishing.run import run_publish

    done = run_publish(cfg)
    for line in done.lines():
        say(line, markup=False)
    return 0 if done.ok else 1

"""`neobench reproduce`: a model against its official MTEB results."""

from __future__ import annotations

from neobench.cli.output import print_listing, say
from neobench.protocol.tasks import build_registry
from neobench.reproduction.config import ReproduceCommand


def cmd_reproduce(cfg: ReproduceCommand) -> int:
    """a model against its official MTEB results; the cause of every miss"""
    build_registry()  # before torch (protocol/tasks.py says why)
    from neobench.reproduction.check import lines, listing
    from neobench.reproduction.run import run_reproduce

    found = run_reproduce(cfg)
    print_listing(listing(found))
    for line in lines(found):
        say(line, markup=False)
    return 0 if found.within else 1

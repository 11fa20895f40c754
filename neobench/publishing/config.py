"""`neobench publish`'s config (`nb.publish`'s keywords): each field's doc is its flag's help."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import TableOptions, like, opt
from neobench.publishing.results import RESULTS_REMOTE


@dataclass(kw_only=True)
class PublishCommand:
    """`neobench publish`: one run in the results repository's layout, its model card, and
    their submission."""

    results: str = opt(".", "results root the run was evaluated into")
    model: str = opt(help="the run to publish: its model name or row label (as `table` shows it)")
    out: str = opt(help="new folder for the results repository's layout and the model card")
    name: str | None = opt(
        None, "hub id it is published under, org/name (default: the run's model name)"
    )
    benchmark: str = like(TableOptions, "benchmark")
    submit: str | None = opt(
        None,
        "a clone of the MTEB results repository: commit the new results to a branch of it "
        "(mteb's submit), ready to push",
        metavar="CLONE",
    )
    results_remote: str = opt(
        RESULTS_REMOTE, "the origin --submit's clone must have", metavar="URL"
    )
    push_to_hub: str | None = opt(
        None, "upload the model folder and its card to this hub repo (org/name)", metavar="REPO"
    )
    verify: int = opt(
        0,
        "re-run this many of the published tasks (the smallest) and check each within 0.001",
        metavar="K",
    )
    data_dir: str | None = opt(
        None, "offline mirror for --verify's re-run (default: the one its run card recorded)"
    )

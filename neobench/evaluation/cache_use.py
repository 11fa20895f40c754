"""How one `neobench eval` uses the embedding cache: opened with its cap, told before each task
whether that task's new embeddings are stored (neobench/protocol/cache_policy.py), recorded in
the run card. It is read for every text under every policy but ``off``; the decision only
switches storing (FastEncoder.store), so scores never depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neobench.encoder.cache import EmbeddingCache, cache_path
from neobench.evaluation.adapter import prompt_for
from neobench.protocol.cache_policy import StoreDecision, decide
from neobench.protocol.config import EvalConfig

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.encoder.encode import FastEncoder

GB = 10**9  # --cache-max-gb counts decimal gigabytes, as disks and `du --si` do


@dataclass
class CacheUse:
    """The policy of one run and the decision it took for each task."""

    policy: str
    max_bytes: int | None  # the cap (None: none)
    prompts: dict[str, str]  # mteb's prompt keys -> prompt, as the encoder uses them
    tasks: dict[str, AbsTask]  # the run's tasks by name
    decisions: dict[str, StoreDecision] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: EvalConfig, prompts: dict[str, str], tasks: list[AbsTask]) -> CacheUse:
        """The run's policy (--no-cache is --cache-policy off) and cap, for its tasks."""
        policy = "off" if cfg.no_cache else cfg.cache_policy
        cap = None if cfg.cache_max_gb is None else int(cfg.cache_max_gb * GB)
        return cls(policy, cap, prompts, {t.metadata.name: t for t in tasks})

    def open(self, folder: str | None) -> EmbeddingCache | None:
        """The run's cache in ``folder`` (None under policy off), its policy and cap written
        into the file."""
        if self.policy == "off":
            return None
        cache = EmbeddingCache(cache_path(folder), max_bytes=self.max_bytes)
        cache.record_settings(self.policy)
        return cache

    def before_task(self, task: AbsTask, later: list[str], fast: FastEncoder) -> None:
        """Tell the encoder whether ``task``'s new embeddings are stored (``later``: the run's
        tasks after it)."""
        fast.store = self.decide(task, later).store

    def decide(self, task: AbsTask, later: list[str]) -> StoreDecision:
        """The policy's decision for ``task`` (recorded for the run card)."""
        decision = decide(self.policy, task, later, self._prompt_of)
        self.decisions[task.metadata.name] = decision
        return decision

    def _prompt_of(self, name: str, side: str) -> str | None:
        from mteb.types import PromptType

        return prompt_for(self.prompts, self.tasks[name].metadata, PromptType(side))

    def record(self, cache: EmbeddingCache | None) -> dict[str, Any]:
        """What the run card's `encoding` says about the cache's policy, cap and use."""
        out: dict[str, Any] = {
            "cache_policy": self.policy,
            "cache_max_bytes": self.max_bytes,
            "cache_stores": {
                name: ("stored: " if d.store else "not stored: ") + d.why
                for name, d in self.decisions.items()
            },
        }
        if cache is not None:
            out["cache_evicted"] = cache.evicted
            out["cache_held_bytes"] = cache.held_bytes()
        return out

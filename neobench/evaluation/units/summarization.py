"""Summarization units: one source text each; the main score is the mean of the texts' ``term``.

mteb drops texts whose human, cosine or dot scores are all equal before saving (undefined
correlation), so `build` matches kept texts back to rows by their human scores; which are dropped
depends on the model, so a part records ``rows`` and two models are paired on the texts both kept
(`neobench.report.bootstrap.shared`). SummEval's DeprecatedSummarizationEvaluator keeps mteb issue
1156 (it averages scipy's (statistic, p-value)); ``term`` is the per-text value as it computes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from neobench.compat.mteb import deprecated_summarization
from neobench.evaluation.units.spec import TypeSpec, data_split
from neobench.evaluation.units.sts import split_name

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

# Prefix of mteb's score name -> the key of the per-summary prediction.
PREDICTION = {"": "similarity_scores", "cosine": "cosine_scores", "dot": "dot_scores"}


def text_term(human: list[float], pred: list[float], correlation: str, deprecated: bool) -> float:
    """One text's share of the main score, as mteb's evaluator computes it."""
    result = (spearmanr if correlation == "spearman" else pearsonr)(human, pred)
    if deprecated:  # np.mean over the result tuple: (statistic + p-value) / 2
        return float(np.mean(np.asarray(result, dtype=np.float64)))
    return float(result.statistic)


def kept_rows(
    task: AbsTask, hf_subset: str, split: str, kept_human: list[list[float]]
) -> list[int]:
    """Dataset row of each kept text: rows in order, each kept text at the next row whose
    normalised relevance equals its human scores (mteb's normalisation, bit for bit)."""
    relevance = data_split(task, hf_subset, split)[task.relevancy_column_name]
    span = task.max_score - task.min_score
    rows: list[int] = []
    for row, scores in enumerate(relevance):
        if len(rows) == len(kept_human):
            break
        if ((np.array(scores) - task.min_score) / span).tolist() == kept_human[len(rows)]:
            rows.append(row)
    if len(rows) != len(kept_human):
        raise ValueError(f"only {len(rows)} of {len(kept_human)} saved texts match dataset rows")
    return rows


def build(
    task: AbsTask, predictions: dict[str, Any], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    prefix, correlation = split_name(task.metadata.main_score, PREDICTION, "a summarization")
    deprecated = deprecated_summarization(task)
    human = predictions["human_scores"]
    terms = [
        text_term(h, p, correlation, deprecated)
        for h, p in zip(human, predictions[PREDICTION[prefix]], strict=True)
    ]
    rows = kept_rows(task, hf_subset, split, human)
    return [str(r) for r in rows], {"term": terms}


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    # the terms belong to the task's main score; refuse any other
    split_name(main_score, PREDICTION, "a summarization")
    return float(np.mean(data["term"][idx]))


def rows(task: AbsTask, hf_subset: str, split: str) -> int:
    """The texts of the split, before mteb drops any."""
    return len(data_split(task, hf_subset, split))


SPEC = TypeSpec(unit="text", build=build, score=score, rows=rows)

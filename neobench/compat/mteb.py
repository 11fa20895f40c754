"""neobench's uses of mteb's private names, each in one function: the "mteb-texts",
and "prediction-json" patches (compat/patches.py), the data loader mteb builds
for a task, the merge of run_settings.jsonl, and the pieces of mteb's scoring the per-item
units reuse bit for bit. What the patches replace and save: docs/performance.md, "Library
patches"; each is compared with mteb's own path in its test (compat/patches.py names it).

"mteb-texts": the texts mteb's data loaders would yield, read column-wise (the adapter takes
mteb's loaders when the gate is off). The functions return the same texts, in the same order,
from one column read (``dataset["text"][:]``), or None (the caller then takes mteb's path)
outside the plain case: other modalities, conversations, instructions, extra columns, a
formatted or transformed dataset, a null anywhere (mteb's collate raises on None), a sampler or
collate other than mteb's own.

"prediction-json": mteb writes with json.dump (the pure-Python encoder: seconds per split of
top-1000 lists); json.dumps with the same arguments gives the identical text through the C
encoder, or the content is kept in memory for the units.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from datasets import Dataset, Value

# --- "mteb-texts" ------------------------------------------------------------------------------

# Arrow string types a text column can have; ids and titles are strings in mteb's formats.
STRING_TYPES = {"string", "large_string"}
# default_collate turns these Values into a tensor (numbers) or a list (strings); anything else
# (dates, nested lists of varying length...) could make mteb's collate raise.
INTEGER_TYPES = {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
COLLATABLE_TYPES = STRING_TYPES | INTEGER_TYPES | {"bool", "float16", "float32", "float64"}


def _plain(dataset: Any, allowed: set[str]) -> bool:
    """A datasets.Dataset with python formatting, every column a Value of an allowed type and
    no null anywhere (null counts of the underlying table: an upper bound under an indices
    mapping, so a null outside the selection only costs the fast path)."""
    if not isinstance(dataset, Dataset) or len(dataset) == 0:
        return False
    # python formatting of every column (datasets may list them in another order after a map)
    columns = set(dataset.format["columns"])
    if dataset.format["type"] is not None or columns != set(dataset.column_names):
        return False
    features = dataset.features
    if not all(isinstance(f, Value) and f.dtype in allowed for f in features.values()):
        return False
    table = dataset.data
    return all(table.column(name).null_count == 0 for name in features)


def document_texts(corpus: Any, modalities: list[str]) -> list[str] | None:
    """mteb's document texts: ``(title + " " + text).strip()`` when the title is not empty,
    else ``text.strip()`` (mteb._create_dataloaders._corpus_to_dict). None outside the plain
    case: a text-only task, columns id/title/text, strings, no null."""
    if modalities != ["text"] or not _plain(corpus, STRING_TYPES):
        return None
    if "text" not in corpus.column_names or not set(corpus.column_names) <= {"id", "title", "text"}:
        return None
    texts = corpus["text"][:]
    if "title" not in corpus.column_names:
        return [text.strip() for text in texts]
    titles = corpus["title"][:]
    return [
        (title + " " + text).strip() if len(title) > 0 else text.strip()
        for title, text in zip(titles, texts, strict=True)
    ]


def query_texts(queries: Any, modalities: list[str]) -> list[str] | None:
    """mteb's query texts: the text column as it is, when there is no instruction to append
    and no conversation to flatten (mteb._create_dataloaders._prepare_dataset). None outside
    the plain case: a text-only task, columns id/text, strings, no null."""
    if modalities != ["text"] or not _plain(queries, STRING_TYPES):
        return None
    if "text" not in queries.column_names or not set(queries.column_names) <= {"id", "text"}:
        return None
    return queries["text"][:]


def loader_texts(loader: Any) -> list[str] | None:
    """Every ``batch["text"]`` of iterating ``loader``, concatenated, read from its dataset's
    column at once; None unless the loader is mteb's plain sequential case (its own collate or
    torch's default, a SequentialSampler, batches without drop_last, plain columns)."""
    from mteb._create_dataloaders import _custom_collate_fn
    from torch.utils.data import BatchSampler, SequentialSampler, default_collate

    if loader.collate_fn not in (default_collate, _custom_collate_fn):
        return None
    if type(loader.sampler) is not SequentialSampler:
        return None
    batches = loader.batch_sampler
    if (
        type(batches) is not BatchSampler
        or batches.drop_last
        or batches.sampler is not loader.sampler
    ):
        return None
    dataset = loader.dataset
    if not _plain(dataset, COLLATABLE_TYPES) or "text" not in dataset.column_names:
        return None
    if dataset.features["text"].dtype not in STRING_TYPES:
        return None
    return dataset["text"][:]


# --- "prediction-json" -------------------------------------------------------------------------
# mteb writes with json.dump (the pure-Python encoder: seconds per split of top-1000 lists);
# json.dumps with the same arguments gives the identical text through the C encoder.


def save_task_predictions(
    task: Any,
    predictions: Any,
    model: Any,
    prediction_folder: Any,
    hf_split: str,
    hf_subset: str,
    kept: dict[str, Any] | None = None,
) -> None:
    """mteb's AbsTask._save_task_predictions (mteb 2.26), writing with json.dumps; with
    ``kept``, the file's content is kept in memory instead (``kept[task name]``), as json.load
    would read it back (json_copy), and no file is written."""
    existing: dict[str, Any] = {
        "mteb_model_meta": {
            "model_name": model.mteb_model_meta.name,
            "revision": model.mteb_model_meta.revision,
        }
    }
    if kept is not None:
        existing = kept.setdefault(task.metadata.name, existing)
        existing.setdefault(hf_subset, {})[hf_split] = json_copy(predictions)
        return
    path = task._predictions_path(prediction_folder)
    if path.exists():
        with path.open("r", encoding="utf-8") as file:
            existing = json.load(file)
    existing.setdefault(hf_subset, {})[hf_split] = predictions
    text = json.dumps(existing)
    with path.open("w", encoding="utf-8") as file:
        file.write(text)


class PlainRanking(dict):
    """``{query id: {document id: score}}`` of str ids and Python floats only, so json_copy
    checks no entry's type (2/3 of the copy's time). mteb may remove entries, never add one."""


def json_copy(value: Any) -> Any:
    """``json.loads(json.dumps(value))`` without the text (lists for tuples, Python floats for
    float subclasses); anything else a round trip would change takes the round trip."""
    kind = type(value)
    if kind is PlainRanking:
        return {qid: dict(docs) for qid, docs in value.items()}
    # set(map(type, ...)) runs in C: no Python step per entry of a ranking.
    if kind is dict:
        if not {*map(type, value)} <= {str}:
            return json.loads(json.dumps(value))
        if {*map(type, value.values())} <= {float}:  # a ranking: {doc id: score}
            return dict(value)
        return {k: json_copy(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        if {*map(type, value)} <= {int, float}:
            return list(value)
        return [json_copy(v) for v in value]
    if value is None or kind in (str, int, float, bool):
        return value
    return json.loads(json.dumps(value))


def prediction_changes(
    tasks: list[Any], kept: dict[str, Any] | None = None
) -> list[tuple[Any, str, Any]]:
    """The "prediction-json" patch: save_task_predictions as each task's instance attribute
    (found before the class's); a class overriding mteb's method keeps its own. With ``kept``,
    the predictions stay in that dict instead of a file."""
    from mteb.abstasks.abstask import AbsTask

    return [
        (task, "_save_task_predictions", functools.partial(save_task_predictions, task, kept=kept))
        for task in tasks
        if type(task)._save_task_predictions is AbsTask._save_task_predictions
        and "_save_task_predictions" not in vars(task)
    ]


# --- the data loader of a task's rows ----------------------------------------------------------


def create_dataloader(rows: Any, **kwargs: Any) -> Any:
    """mteb's data loader over ``rows`` as its evaluators build it (mteb exports no public one):
    the texts worded as the task words them (titles, instructions, conversations)."""
    from mteb._create_dataloaders import create_dataloader as mteb_loader

    return mteb_loader(rows, **kwargs)


def undersample(task: Any, train: Any, experiment: int) -> Any:
    """A classification task's undersampled training split for one experiment, as mteb draws it
    (what the "column-cache" patch speeds up; benchmarks/patch_gains.py times it)."""
    return task._undersample_data(train, experiment)


def stock_save_predictions(task: Any, *args: Any) -> None:
    """mteb's own prediction writer (AbsTask._save_task_predictions), bypassing any
    "prediction-json" replacement: the stock path a benchmark compares with."""
    from mteb.abstasks.abstask import AbsTask

    AbsTask._save_task_predictions(task, *args)


def benchmark_registry() -> dict[str, Any]:
    """mteb's benchmark registry, the dict ``mteb.get_benchmark`` looks names up in: mteb 2.x
    builds it once and offers no public way to add a benchmark (a benchmark's synthetic task is
    put in and taken out again: benchmarks/scale_rehearsal.py)."""
    import sys

    import mteb.benchmarks.get_benchmark  # noqa: F401  (the module; mteb.benchmarks exports
    # a function of the same name, so the module is taken from sys.modules)

    build = getattr(sys.modules["mteb.benchmarks.get_benchmark"], "_build_registry", None)
    if build is None:
        raise RuntimeError(
            "this mteb version has no benchmark registry to add a benchmark to "
            "(mteb.benchmarks.get_benchmark._build_registry); use the tested mteb "
            "(constraints/tested.txt)"
        )
    registry: dict[str, Any] = build()
    return registry


# --- results -----------------------------------------------------------------------------------


def merge_run_settings(into: Path, new: Path) -> None:
    """The entries of the run_settings.jsonl ``new`` merged into the file ``into`` by mteb's own
    merge: mteb's exact format (it exports no public one)."""
    from mteb.results.task_result import _read_run_settings_from_file, _write_and_merge_keyed_json

    _write_and_merge_keyed_json(into, _read_run_settings_from_file(new))


# --- pieces of mteb's scoring, reused bit for bit by the per-item units ------------------------


def normalized_score(task: Any, value: float) -> float:
    """An STS task's gold score as mteb normalises it before correlating (float64, its order of
    operations)."""
    return task._normalize(value)


def best_accuracy(scores: list[float], labels: Any, higher_similar: bool) -> float:
    """Pair classification's accuracy at its best threshold, by mteb's own search (it skips
    tied scores, which a re-implementation would have to match)."""
    from mteb.abstasks.pair_classification import AbsTaskPairClassification

    # The search never reads ``self`` (mteb marks it PLR6301), so no task is built.
    found = AbsTaskPairClassification._find_best_acc_and_threshold(
        None, scores, labels, higher_similar
    )
    return float(found[0])


def best_f1(scores: list[float], labels: Any, higher_similar: bool) -> tuple[float, float, float]:
    """Pair classification's (F1, precision, recall) at the best F1 threshold, by mteb's own
    search."""
    from mteb.abstasks.pair_classification import AbsTaskPairClassification

    f1, precision, recall, _ = AbsTaskPairClassification._find_best_f1_and_threshold(
        None, scores, labels, higher_similar
    )
    return float(f1), float(precision), float(recall)


def deprecated_summarization(task: Any) -> bool:
    """Whether the task scores with SummEval's deprecated evaluator, which averages scipy's
    (statistic, p-value) pair (mteb issue 1156)."""
    from mteb._evaluators.text.summarization_evaluator import DeprecatedSummarizationEvaluator

    return issubclass(task.evaluator, DeprecatedSummarizationEvaluator)

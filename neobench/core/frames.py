"""The one DataFrame convention of every ``to_pandas()``, so frames join without a rescale or cast:
scores, differences, interval bounds and seed sd x100 (mteb stores 0-1), float64, NaN where
absent; p-values and counts as they are; a run named by core/runs.NAMES, its conditions by
core/conditions.RECORD. pandas is imported only when a frame is asked for."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SCALE = 100.0  # mteb's 0-1 scores -> the tables' 0-100


def scaled(value: float | None) -> float:
    """A score as mteb stores it (0-1) on the frames' scale; NaN where there is none."""
    return math.nan if value is None else SCALE * value


def number(value: float | None) -> float:
    """A value already on the frames' scale as a float; NaN where there is none."""
    return math.nan if value is None else float(value)


def frame(
    rows: list[dict[str, Any]], floats: Iterable[str], columns: Iterable[str] | None = None
) -> pd.DataFrame:
    """``rows`` as a DataFrame whose ``floats`` columns are float64 (an empty or all-absent
    column too, never ``object``); ``columns`` name the columns of a frame with no rows."""
    import pandas as pd

    found = pd.DataFrame(rows, columns=None if rows or columns is None else list(columns))
    for column in floats:
        if column in found.columns:
            found[column] = found[column].astype("float64")
    return found

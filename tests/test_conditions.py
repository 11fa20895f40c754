"""core/conditions.py: one declaration of the conditions, one rule comparing them, used by the
table, the results folder check and a study's conflict check alike."""

from __future__ import annotations

from neobench.core import conditions
from neobench.core.conditions import Conditions


def test_the_named_fields_are_views_of_the_one_declaration():
    # The CSV and JSON columns (RECORD) and a study's eval flags (FLAGS) in their fixed order.
    assert conditions.RECORD == (
        "finetuned", "recipe_sha256", "instructions", "instructions_sha256", "max_seq_length",
        "dtype", "benchmark", "mteb",
    )  # fmt: skip
    assert conditions.FLAGS == ("benchmark", "instructions", "max_seq_length", "dtype")
    assert conditions.PINNED == ("instructions", "max_seq_length", "dtype")
    assert set(conditions.SCORING) <= set(conditions.EVAL) and "benchmark" not in conditions.SCORING
    assert conditions.FOLDER == ("instructions", "instructions_sha256", "max_seq_length", "dtype")
    declared = {c.name for c in conditions.DECLARED}
    assert declared == set(conditions.FIELDS) == {conditions.RECIPE, *conditions.EVAL}


def test_one_rule_text_equality_with_unrecorded_reading_unknown():
    card = Conditions({"max_seq_length": 512, "dtype": None})
    flags = Conditions.asked({"max_seq_length": "512", "dtype": "bfloat16", "seed": 3})
    assert card.same(flags, "max_seq_length")  # an int in a card, text in a flag
    assert card.differences(flags, ["max_seq_length", "dtype"]) == {
        "dtype": ("unknown", "bfloat16")
    }
    # known=True: what the earlier card does not record is not held against it.
    assert card.differences(flags, ["max_seq_length", "dtype"], known=True) == {}
    assert set(flags) == set(conditions.FLAGS)  # asked: the flags only, never other options


def test_the_recipe_is_compared_only_between_fine_tuned_runs():
    tuned = Conditions({conditions.RECIPE: "abc123", "mteb": "2.26.24"})
    stock = Conditions({conditions.RECIPE: conditions.NOT_FINETUNED, "mteb": "2.26.24"})
    other = Conditions({conditions.RECIPE: "def456", "mteb": "2.26.24"})
    assert tuned.differences(stock) == {}
    assert tuned.differences(other) == {conditions.RECIPE: ("abc123", "def456")}
    groups = conditions.groups([("a", tuned), ("b", stock), ("c", other)])
    assert groups == {conditions.RECIPE: {"abc123": ["a"], "def456": ["c"]}}

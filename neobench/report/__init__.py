"""Runs -> leaderboard and comparisons: the one reader of results (load), the one statistics
engine (stats, over bootstrap), the table and its annotations, `compare`, the page's data, and
every writer under render/ (docs/architecture.md).
May import: evaluate (to read per-item units), protocol, core. Not models, encoder or train.
"""

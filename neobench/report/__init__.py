"""Runs -> leaderboard and comparisons.

Owns: the one reader of results (load), the one statistics engine (stats) over the bootstrap
primitives (bootstrap), the table (table, leaderboard) and its annotations (intervals, replicates,
overlap), `compare`, the leaderboard page's data (page), the column names (columns) and every
writer under render/.
May import: evaluate (to read per-item units), protocol, core. Not models, encoder or train.
"""

"""Runs -> leaderboard and comparisons.

Owns: the one reader of results for every report (load), the one statistics engine (stats: a
run's resampled scores, paired tests, Holm) over the bootstrap primitives (bootstrap), the table
(table: rows and cells; leaderboard: `neobench table`), its annotations (intervals: ± and ▲/▼;
replicates: seed sd; overlap: † and Zero-shot), `compare`, the leaderboard page's data (page: every
view and pair of `table --html`), the column names (columns) and every writer under render/
(terminal, md, csv, tex, json, png, html).
May import: evaluate (to read per-item units), protocol, core. Not models, encoder or train.
"""

"""Runs -> leaderboard: the table, seed replicates as rows, bootstrap intervals and paired
tests, `compare`, and the writers under render/.

May import: evaluate (to read per-item units), protocol, core. Not models, encoder or train.
"""

"""mteb driven: the model mteb evaluates (adapter), staged atomic result writes, per-item units,
and `neobench eval` itself (runner, with its pieces: checks, model, results_folder, runcard,
outcomes).

Owns: run_eval, the adapter between mteb and the encoder, staging, the datasets/mteb shortcuts
(fastdata, mtebtexts), units/ (what each task's main score is a function of).
May import: encoder, models, protocol, core. Not train (the stages do not know each other).
"""

"""`neobench publish`: a run in the forms the MTEB leaderboard (the results repository) and the
Hugging Face hub (a model card) take, their submission, and the maintainers' re-run check. Imports
report (the runs), evaluation (--verify re-runs tasks) and the layers below them."""

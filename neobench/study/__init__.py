"""Studies: one YAML file compares many encoders under identical conditions (docs/studies.md).

May import: train, models, encoder, protocol, core (torch only where models.build builds a
model); nothing imports it but the CLI. Jobs only run the existing commands (`finetune`, `eval
--shard`, `table`), so every launcher runs the same list.

    spec.py, models.py  the study file as typed dataclasses; model entries -> model paths
    conflicts.py        names checked by the commands' loaders; finished pieces vs the study
    plan.py             a study -> jobs (jobs.py, sweep_plan.py); store.py: job records, states
    report.py           plan and status listings; launchers/: local, slurm, slurm_job (the node)
"""

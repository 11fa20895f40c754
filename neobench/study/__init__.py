"""Studies: one YAML file compares many encoders under identical conditions.

May import: train, models, encoder, protocol, core (torch only where models.build builds a
model); nothing imports it but the CLI. The jobs only run the existing commands (`neobench
finetune`, `neobench eval --shard`, `neobench table`), so every launcher runs the same list.

    spec.py       the study file as typed dataclasses, every problem of its shape at once
    models.py     model entries (hub id, folder, glob, pypi:, config:) -> concrete model paths
    conflicts.py  names checked by the commands' own loaders; finished pieces vs the study
    plan.py       a study -> jobs (finetune -> eval shards -> table); jobs.py, sweep_plan.py
    store.py      the job records (OUTPUT/jobs/<key>.json) and the state of a job
    report.py     the plan and the status as listings for the CLI
    launchers/    where the jobs run, by name: local.py (one after another, here), slurm.py
                  (submitit, afterok dependencies), slurm_job.py (what runs on the node)
"""

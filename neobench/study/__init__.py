"""Studies: one YAML file compares many encoders under identical conditions.

    spec.py       the study file as typed dataclasses, every problem of its shape at once
    models.py     model entries (hub id, folder, glob, pypi:, config:) -> concrete model paths
    conflicts.py  names checked by the commands' own loaders; finished pieces vs the study
    plan.py       a study -> jobs (finetune -> eval shards -> table): argv, resources, what is done
    launch.py     the local launcher: pending jobs one after another, each with its log and record
    slurm.py      the Slurm launcher: the same jobs through submitit, with afterok dependencies
    report.py     the plan and the status as listings for the CLI

The jobs only ever run the existing commands (`neobench finetune`, `neobench eval --shard`,
`neobench table`), so both launchers run the same list.
"""

"""Studies: one YAML file compares many encoders under identical conditions.

    spec.py     the study file as typed dataclasses, every problem reported at once
    models.py   model entries (hub id, folder, glob, pypi:, config:) -> concrete model paths
    plan.py     a study -> jobs (finetune -> eval shards -> table): argv, resources, what is done
    launch.py   the local launcher: pending jobs one after another, each with its log

The jobs only ever run the existing commands (`neobench finetune`, `neobench eval --shard`,
`neobench table`), so a cluster launcher submits the same list.
"""

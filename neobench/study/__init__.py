"""Studies: one YAML file compares many encoders under identical conditions.

The package owns the study file, its plan (which jobs, in which order, what is done), the job
records, and the launchers that run the jobs. It may import neobench.core, neobench.protocol
(config, recipes, instruction profiles, tasks, listings), neobench.models (checking and building
a model entry), neobench.train (where a fine-tune leaves its checkpoints) and neobench.encoder
(the embedding cache's file and environment names); nothing imports it but the CLI. torch and
transformers are imported only where a model is built (models.build).

    spec.py       the study file as typed dataclasses, every problem of its shape at once
    models.py     model entries (hub id, folder, glob, pypi:, config:) -> concrete model paths
    conflicts.py  names checked by the commands' own loaders; finished pieces vs the study
    plan.py       a study -> jobs (finetune -> eval shards -> table): argv, resources, what is done
    store.py      the job records (OUTPUT/jobs/<key>.json) and the state of a job
    report.py     the plan and the status as listings for the CLI
    launchers/    where the jobs run, by name (LAUNCHERS in launchers/__init__.py):
        local.py      pending jobs one after another, each with its log and record
        slurm.py      the same jobs through submitit, with afterok dependencies: what is checked
                      before submitting (a default partition, the resources sinfo offers), the
                      submission, how a job ended (sacct, scontrol, its stderr and log lines)
        slurm_job.py  what runs on the compute node, pickled by submitit: the job's command,
                      its checkpoint and requeue near the time limit

The jobs only ever run the existing commands (`neobench finetune`, `neobench eval --shard`,
`neobench table`), so every launcher runs the same list.
"""

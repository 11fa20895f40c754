"""What "the standard" is, as data: the configs and their one source of defaults (config), recipes,
the dataset manifest (manifest, data), instruction profiles, a benchmark's tasks, train/eval
overlap, the offline mirror, `validate` and the listings of `ls` (listing).
May import: compat, core.
"""

"""What "the standard" is, as data: the recipe and its defaults, the dataset manifest, instruction
profiles, the tasks of a benchmark, the offline mirror, validation and the listings of `ls`.

Owns: the configs of the stages and their one source of defaults (config), recipes (recipe,
recipes/), training datasets as data (manifest, data), instructions, benchmark tasks (tasks),
train/eval overlap in mteb's vocabulary (overlap), the hub mirror (mirror), `validate`, `ls`.
May import: core.
"""

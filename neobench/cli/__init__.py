"""The `neobench` command: parse flags into a config, call one library function, print it.

Owns: the parser and commands (main), flags built from config dataclasses (flags), progress
display (progress), the examples under --help (examples). The only place that decides how output
looks. May import: every other package; nothing imports cli.
"""

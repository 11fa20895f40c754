"""The `neobench` command: parse flags into a config, call one library function, print it.
Owns: the parser and dispatch (main, flags), one module per command group, the --help examples,
and how output looks (output, progress): the only package that decides it.
May import: every other package; nothing imports cli.
"""

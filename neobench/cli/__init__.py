"""The `neobench` command: parse flags into a config, call one library function, print it.

Owns: the parser, dispatch and error handling (main), one module per command group (run:
eval/finetune, report: table/compare, data: ls/validate/data/cache, bench, study), how output
looks (output, progress), flags built from config dataclasses (flags), the examples under --help
(examples). The only place that decides how output looks. May import: every other package;
nothing imports cli.
"""

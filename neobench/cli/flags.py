"""Command-line arguments built from a config dataclass, and the config read back from them.

One field is one argument (``--field-name`` or a positional word): type from the annotation,
default from the field, help from ``metadata["help"]`` (config.opt), so parser and config cannot
drift apart. ``choices`` are enforced here for positional words only: the command checks an
option's, reporting every bad value at once with "did you mean" (argparse stops at the first).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

# A command: its words (``("data", "verify")``), the dataclass of its arguments (None: none), its
# handler and its example (the help's epilog).
Command = tuple[tuple[str, ...], type | None, Callable[[Any], int], str | None]


def add_commands(
    parser: argparse.ArgumentParser,
    commands: list[Command],
    groups: dict[str, tuple[str, str, str | None]],
) -> None:
    """Sub-commands from a command table, with ``handler`` and ``config_class`` as defaults; the
    first line of the handler's docstring is the help. A two-word command sits under a group word
    that ``groups`` describes: (metavar of its sub-commands, help, example)."""
    fmt = argparse.RawDescriptionHelpFormatter
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    below: dict[str, Any] = {}
    for words, cls, handler, example in commands:
        where = top
        if len(words) == 2:
            if words[0] not in below:
                metavar, help_text, group_example = groups[words[0]]
                group = top.add_parser(
                    words[0], help=help_text, epilog=group_example, formatter_class=fmt
                )
                dest = f"{words[0]}_command"
                below[words[0]] = group.add_subparsers(dest=dest, required=True, metavar=metavar)
            where = below[words[0]]
        help_text = (handler.__doc__ or "").strip().splitlines()[0]
        sub = where.add_parser(words[-1], help=help_text, epilog=example, formatter_class=fmt)
        if cls is not None:
            add_fields(sub, cls)
        sub.set_defaults(handler=handler, config_class=cls)


def csv_list(text: str | None) -> list[str] | None:
    """Comma-separated names; None when the flag was not given, [] for ``--tasks ""`` (which the
    commands refuse rather than read as "everything")."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def add_fields(parser: argparse.ArgumentParser, cls: type) -> None:
    """One argument per field of the dataclass ``cls``, in field order, except that a field with
    ``after`` comes right behind the field it names (a subclass's flag among its base's)."""
    hints = typing.get_type_hints(cls)
    shown: list[dataclasses.Field] = []
    for f in dataclasses.fields(cls):
        placed = [g.name for g in shown]
        after = f.metadata.get("after")
        shown.insert(placed.index(after) + 1 if after in placed else len(shown), f)
    for f in shown:
        names, kwargs = argument(f, hints[f.name])
        parser.add_argument(*names, **kwargs)


def config_from_args(cls: type, namespace: argparse.Namespace) -> Any:
    """The dataclass ``cls`` filled from parsed arguments; where argparse left None, the field's
    default applies."""
    given = {
        f.name: getattr(namespace, f.name)
        for f in dataclasses.fields(cls)
        if getattr(namespace, f.name, None) is not None
    }
    return cls(**given)


def argument(f: dataclasses.Field, hint: Any) -> tuple[list[str], dict[str, Any]]:
    """The names and add_argument keywords of one field."""
    meta = f.metadata
    default = field_default(f)
    kwargs: dict[str, Any] = {"help": _help(meta.get("help", ""), default, meta)}
    if meta.get("metavar"):
        kwargs["metavar"] = meta["metavar"]
    if meta.get("positional"):
        if meta.get("choices"):
            kwargs["choices"] = list(meta["choices"])
        if _is_list(hint):
            kwargs["nargs"] = "*"
        elif default is not dataclasses.MISSING:
            kwargs.update(nargs="?", default=default)
        return [f.name], kwargs
    kwargs["dest"] = f.name
    kwargs.update(_value_kwargs(hint, meta, default))
    if default is dataclasses.MISSING:
        kwargs["required"] = True
    return [meta.get("flag") or "--" + f.name.replace("_", "-")], kwargs


def _value_kwargs(hint: Any, meta: typing.Mapping[str, Any], default: Any) -> dict[str, Any]:
    """How an option reads its value: a switch, a parsed type, or a repeatable string."""
    if hint is bool:
        return {"action": "store_true"}
    if meta.get("csv"):
        # argparse applies `type` to string defaults only: a list default stays as it is.
        return {"type": csv_list, "default": default}
    if _is_list(hint):
        # argparse appends to a default list in place: keep None and let the field default apply.
        return {"action": "append", "default": None}
    kwargs: dict[str, Any] = {"default": None if default is dataclasses.MISSING else default}
    parse = _scalar_type(hint)
    if parse is not None:
        kwargs["type"] = parse
    return kwargs


def field_default(f: dataclasses.Field) -> Any:
    """The field's default (its factory called), or MISSING when the field must be given."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _members(hint: Any) -> tuple[Any, ...]:
    """The types of a union (``int | None`` -> int, NoneType), or the type itself."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _is_list(hint: Any) -> bool:
    return any(typing.get_origin(t) is list for t in _members(hint))


def _scalar_type(hint: Any) -> Callable[[str], Any] | None:
    """int or float for ``int`` / ``float`` (``| None``); None (a plain string) for str and mixed
    unions such as ``int | str``, which the command parses itself ("512" or "model")."""
    real = [t for t in _members(hint) if t is not type(None)]
    return real[0] if real in ([int], [float]) else None


def _help(text: str, default: Any, meta: typing.Mapping[str, Any]) -> str:
    """The field's doc with its default, as argparse shows it (``%`` escaped for its format)."""
    shown = _shown(default, meta)
    if shown is not None and "default" not in text:
        text = f"{text} (default {shown})" if text else f"default {shown}"
    return text.replace("%", "%%")


def _shown(default: Any, meta: typing.Mapping[str, Any]) -> str | None:
    """How a default reads in the help; None for no default, off or empty."""
    if default is dataclasses.MISSING or default is None or default is False or default == []:
        return None
    if isinstance(default, list):
        return ",".join(map(str, default)) if meta.get("csv") else " ".join(map(str, default))
    text = str(default)
    return f'"{text}"' if " " in text else text

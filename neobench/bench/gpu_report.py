"""`neobench bench gpu`'s output: the record (built by gpu.py; its keys in docs/performance.md)
as JSON, and one Markdown table of every row with a line naming the device, the texts and each
section's status."""

from __future__ import annotations

import json
from typing import Any

HEAD = (
    "| section | model / task | variant | tokens/s | % of peak | peak memory (MiB) | result |",
    "|---|---|---|---:|---:|---:|---|",
)
NO_FIGURES = ("–", "–", "–")  # tokens/s, % of peak, peak memory of a row that only checks


def to_json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, default=str) + "\n"


def markdown(record: dict[str, Any]) -> str:
    """The caption, the table (one line per row of every section), each section's status."""
    lines = [_caption(record), "", *HEAD]
    render = {
        "train": _train,
        "encode": _encode,
        "unpadded": _unpadded,
        "corpus": _corpus,
        "scores": lambda r: _scores(r, record["settings"]),
        "topk": _topk,
    }
    for name, section in record["sections"].items():
        for row in section["rows"]:
            cells = [name, *render[name](row)]
            # pipes escaped so that a model name or an error cannot split a cell
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    for name, section in record["sections"].items():
        budget = section["budget_s"]
        spent = f"{section['seconds']:.0f} s" + (f" of {budget} s" if budget is not None else "")
        why = f": {section['reason']}" if section["reason"] else ""
        lines.append(f"- {name}: {section['status']} ({spent}){why}")
    return "\n".join(lines) + "\n"


def _caption(record: dict[str, Any]) -> str:
    device, settings, texts = record["device"], record["settings"], record["texts"]
    where = device["name"] if device["type"] == "cuda" else f"CPU, {device['threads']} threads"
    peak = device["peak_flops"]
    peak = f", nominal peak {peak / 1e12:.0f} TFLOP/s" if peak else ""
    about = "train and corpus texts generated at MTEB's lengths"
    if texts:
        origin = f"the mirror's {', '.join(texts['tasks'])}" if texts["tasks"] else "synthetic"
        about += (
            f"; encode: {texts['count']:,} texts ({origin}), {texts['mean_tokens']:.0f} tokens "
            f"each on average, at most {texts['max_seq_length']}"
        )
    return (
        f"`neobench bench gpu --size {settings['size']}` on {where}{peak}; encoding and scores "
        f"in {settings['dtype']}; {about}; {record['seconds']:.0f} s in all."
    )


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _ok(flag: bool) -> str:
    return "ok" if flag else "FAIL"


def _train(row: dict) -> list[str]:
    loss = f"loss {_num(row['first_loss'], 3)} -> {_num(row['final_loss'], 3)}"
    result = f"{loss}, {'finite' if row['loss_finite'] else 'NOT finite'}, {row['precision']}"
    fraction = row.get("peak_fraction")  # of the training ceiling; rows before it had none
    figures = [_num(row["tokens_per_s"]), _percent(fraction), _num(row["peak_memory_mb"])]
    shape = ""
    if row.get("shape") == "recipe":
        shape = (
            f" of {row['queries_per_step']} queries x {2 + row['negatives']} texts, at most "
            f"{row['max_length']} tokens"
        )
    how = f" {row['variant']}" if row.get("variant") else ""
    variant = f"{row['trainer']}{how} ({row['steps_timed']} steps{shape})"
    memory = row.get("memory") or {}
    if memory.get("chunks"):
        result += f"; GradCache chunks {', '.join(memory['chunks'])}"
    elif memory:
        result += "; plain loss"
    if row.get("estimate_error") is not None:
        result += f"; estimate {row['estimate_gib']:.1f} GiB ({row['estimate_error']:+.0%})"
    return [row["model"], variant, *figures, result + (f"; {row['error']}" if row["error"] else "")]


def _encode(row: dict) -> list[str]:
    figures = [
        _num(row["tokens_per_s"]),
        _percent(row["peak_fraction"]),
        _num(row["peak_memory_mb"]),
    ]
    result = f"{row['texts']:,} texts, {row['tokens']:,} tokens in {row['seconds']:.2f} s"
    return [row["model"], f"{row['path']} ({row['attention']})", *figures, result]


def _corpus(row: dict) -> list[str]:
    variant = f"search {row['documents']:,} docs x {row['queries']:,} queries ({row['attention']})"
    figures = [
        _num(row["tokens_per_s"]),
        _percent(row["peak_fraction"]),
        _num(row["peak_memory_mb"]),
    ]
    result = (
        f"{row['tokens']:,} tokens in {row['seconds']:.2f} s; forward "
        f"{_percent(row['forward_share'])}"
        f" of the time, host {_percent(row['host_share'])}; MTEB(eng, v1) about "
        f"{row['v1_minutes']:,.0f} min; {row['ranked']:,} queries ranked "
        f"{_ok(row['listed'] == row['expected_listed'])}"
    )
    return [row["model"], variant, *figures, result]


def _percent(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.1f}%"


def _unpadded(row: dict) -> list[str]:
    result = (
        f"max abs diff {row['max_abs_diff']:.2e} (values up to {row['max_abs_value']:.2f}), "
        f"lowest cosine {row['min_cosine']:.6f} (floor {row['cosine_floor']}) "
        f"{_ok(row['within'])}; stock vs padded {row['stock_max_abs_diff']:.2e}"
    )
    return [row["model"], f"unpadded vs padded ({row['architecture']})", *NO_FIGURES, result]


def _scores(row: dict, settings: dict) -> list[str]:
    variant = f"{row['model']}: {settings['dtype']} on {settings['device']} vs CPU float32"
    result = (
        f"{row['device_score']:.5f} vs {row['cpu_float32_score']:.5f}, diff "
        f"{row['abs_diff']:.5f} (tolerance {row['tolerance']}) {_ok(row['within'])}"
    )
    return [row["task"], variant, *NO_FIGURES, result]


def _topk(row: dict) -> list[str]:
    size = f"{row['queries']:,} x {row['docs']:,}, dim {row['dim']}, k {row['k']}"
    result = (
        f"identical {row['identical']:,}, near-ties {row['near_ties']:,}, differing "
        f"{row['differing']:,} {_ok(row['differing'] == 0)}; {row['device_seconds']:.2f} s vs "
        f"{row['cpu_seconds']:.2f} s"
    )
    return [size, "device vs CPU exact", *NO_FIGURES, result]

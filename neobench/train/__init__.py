"""THE recipe top to bottom: the fine-tune (finetune) and the parts its steps call: inputs, data,
run_card, trainer (loss, stock trainer), devices, seeds; sampling, telemetry, output.

May import: models, protocol, compat, core. Not evaluate or encoder (the stages do not know each
other).
"""

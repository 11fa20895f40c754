"""THE recipe top to bottom: the fine-tune (finetune), its dataset sampler (sampling), loss curve
and telemetry, and its output folder (output).

May import: models, protocol, core. Not evaluate or encoder (the stages do not know each other).
"""

"""THE recipe top to bottom: the fine-tune (finetune) and the parts its steps call: checked
inputs (inputs), training data (data), the run card (run_card), loss and stock trainer (trainer),
processes and precision (devices), one run per seed (seeds); its dataset sampler (sampling), loss
curve and telemetry, and its output folder (output).

May import: models, protocol, core. Not evaluate or encoder (the stages do not know each other).
"""

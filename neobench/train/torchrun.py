"""`python -m neobench.train.torchrun ...`: torchrun (same arguments), for a job a cluster signals.
Stock torchrun's agent dies of SIGUSR2 at once and answers SIGTERM with a traceback; this one
ignores SIGUSR2 (the workers checkpoint and exit 140: stop.py) and ends on a signal or a worker's
exit with one line and the workers' exit code, so the job can tell a saved stop from a failure.
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    if hasattr(signal, "SIGUSR2"):
        # Ignored here and, inherited, in the workers until their fine-tune handles it.
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        torchrun()
    except SignalException as error:
        print(f"torchrun: {signal.Signals(error.sigval).name}: workers stopped", file=sys.stderr)
        return 128 + int(error.sigval)
    except ChildFailedError as error:
        codes = sorted({f.exitcode for f in error.failures.values()})
        print(f"torchrun: worker(s) exited with {codes}; their log above says why", file=sys.stderr)
        return next((c for c in codes if c > 0), 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

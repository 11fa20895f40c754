import signal
import sys

from neobench.cli.main import main

code = main()
# The run has ended and said how; a SIGTERM or SIGUSR2 from here on (torchrun stopping the other
# ranks once one has exited, a scancel racing the exit) could only replace that exit code with
# "killed by a signal" while the interpreter shuts down.
for name in ("SIGTERM", "SIGUSR2"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
sys.exit(code)

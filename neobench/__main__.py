import sys

from neobench.cli.main import main

# The run has ended and said how when main returns; a SIGTERM or SIGUSR2 from then on (torchrun
# stopping the other ranks once one has exited, a scancel racing the exit) could only replace
# that exit code with "killed by a signal" while the interpreter shuts down: main ignores them
# from its last line on, with no instant of their default action in between.
sys.exit(main(then_ignore=True))

import sys

from neobench.cli import main

sys.exit(main())

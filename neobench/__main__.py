import sys

from neobench.cli.main import main

sys.exit(main())

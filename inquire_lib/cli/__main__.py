"""`python -m inquire_lib.cli ...`: the `inquire` command (as `accelerate launch -m` and `torchrun -m` run it)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m gridbus.console.cli`: the gridbus command (as PersonalPool runs it)."""

import sys

from gridbus.console.cli import main

sys.exit(main())

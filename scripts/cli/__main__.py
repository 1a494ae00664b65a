"""`python -m offhours.scripts.cli`: the `offhours` command line."""

import sys

from offhours.scripts.cli.main import main

sys.exit(main())

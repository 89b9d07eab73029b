"""``python -m iosweep``: the ``iosweep`` command."""

import sys

from iosweep.cli import main

sys.exit(main())

"""``python -m fleet_agent`` is the same as the ``fleet-agent`` console script."""

import sys

from fleet_agent.cli import main

sys.exit(main())

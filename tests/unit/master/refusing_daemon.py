"""A daemon that stops at once as one whose queue it may not use does (DAEMON_NO_RESTART)."""

import sys

from gridbus.topology import DAEMON_NO_RESTART

print("gridbus refusing: queue q exists as durable classic {} but this version needs durable quorum {}", file=sys.stderr)
sys.exit(DAEMON_NO_RESTART)

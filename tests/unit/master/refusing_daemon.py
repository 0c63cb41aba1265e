"""A daemon that stops at once as one whose queue it may not use does (DAEMON_NO_RESTART), through
the runner's own ending (its sentence on stderr and in the master's exit reason file)."""

from gridbus.agent.runner import stop_for_good

stop_for_good("refusing", "queue q exists as durable classic {} but this version needs durable quorum {}")

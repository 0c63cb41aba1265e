"""``python -m gridbus.agents.negotiator``."""

from gridbus.agents.negotiator.main import main

main()

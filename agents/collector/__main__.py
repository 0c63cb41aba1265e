"""`python -m gridbus.agents.collector`: run the collector until SIGTERM."""

from gridbus.agents.collector import main

main()

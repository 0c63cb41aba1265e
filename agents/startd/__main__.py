"""`python -m gridbus.agents.startd`: run the startd until SIGTERM."""

from gridbus.agents.startd import main

main()

"""`python -m gridbus.agents.master`: run the master (and its daemons) until SIGTERM."""

from gridbus.agents.master import main

main()

"""`python -m gridbus.console.web`: run the web console daemon until SIGTERM."""

from gridbus.console.web.main import main

main()

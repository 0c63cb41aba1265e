"""``python -m gridbus.console.dagman -Dag file.dag ...``: the DAGMan job's program (condor_dagman's flags)."""

from gridbus.console.dagman.main import main

raise SystemExit(main())

"""``python -m gridbus.dagman -Dag file.dag ...``: the DAGMan job's program (condor_dagman's flags)."""

from gridbus.dagman.main import main

raise SystemExit(main())

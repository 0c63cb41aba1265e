"""DAGMan: runs a DAG of jobs as a client of the schedd (see gridbus.dagman.main)."""

"""HTCondor's DAG description language: the model, the parser and the writer.

    from gridbus.dag import parse_file, format_dag
    dag = parse_file("diamond.dag")
    print(format_dag(dag))
"""

from gridbus.dag.model import FINAL, JOB, SUBDAG, Dag, Node, Script
from gridbus.dag.parser import DagError, apply_rescue, parse_file, parse_text
from gridbus.dag.writer import format_dag, rescue_text

__all__ = ["FINAL", "JOB", "SUBDAG", "Dag", "DagError", "Node", "Script", "apply_rescue", "format_dag",
           "parse_file", "parse_text", "rescue_text"]

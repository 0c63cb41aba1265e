"""HTCondor's submit description language (`Submit` mirrors htcondor2.Submit)."""

from gridbus.submit.description import Built, Submit
from gridbus.submit.errors import SubmitError, SubmitWarning, UnusedMacroWarning
from gridbus.submit.queue import QueueArgs, parse_queue

__all__ = ["Built", "QueueArgs", "Submit", "SubmitError", "SubmitWarning", "UnusedMacroWarning", "parse_queue"]

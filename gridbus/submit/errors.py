"""What the submit language raises and warns with."""

from __future__ import annotations

from gridbus.errors import HTCondorException


class SubmitError(HTCondorException, ValueError):  # htcondor2 raises HTCondorException here
    """A submit description that cannot make jobs; the message names the line when there is one."""

    def __init__(self, message: str, lineno: int | None = None):
        self.lineno = lineno
        self.reason = message
        super().__init__(f"line {lineno}: {message}" if lineno else message)


class SubmitWarning(UserWarning):
    """A command HTCondor knows and gridbus accepts but does not act on, and similar advice."""


class UnusedMacroWarning(SubmitWarning):
    """A line of a submit description that is no command and that nothing refers to: condor_submit's
    "the line 'x = y' was unused ... Is it a typo?" (``gridbus submit -unused`` leaves it out, as
    condor_submit -unused does)."""

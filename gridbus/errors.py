"""HTCondorException: the base of every error the htcondor2-style API raises (as in htcondor2).

The API's errors keep their Python kinds too, so both ``except ValueError`` and ``except
htcondor.HTCondorException`` catch a bad argument. Shared by the console and gridbus.rpc (whose
CallFailed and CallTimeout are HTCondorExceptions), without importing either.
"""

from __future__ import annotations


class HTCondorException(Exception):
    """An error from the htcondor2-style API: a failed call, a daemon not found, a bad argument."""


class HTCondorValueError(HTCondorException, ValueError):
    pass


class HTCondorTypeError(HTCondorException, TypeError):
    pass


class HTCondorLookupError(HTCondorException, LookupError):
    pass


class HTCondorPermissionError(HTCondorException, PermissionError):
    pass


class HTCondorNotImplementedError(HTCondorException, NotImplementedError):
    pass


class HTCondorConnectionError(HTCondorException, ConnectionError):
    pass


class HTCondorRuntimeError(HTCondorException, RuntimeError):
    pass


class NoRestart(RuntimeError):
    """A daemon cannot run until an operator acts (a broker queue it may not use, a job queue
    written by a newer version): it stops with this one sentence and the status that tells its
    master not to start it again (HTCondor's DAEMON_NO_RESTART)."""


# The file a daemon started by a master writes its NoRestart sentence to (the master names it in
# this variable): its log holds the sentence too, but the master shows it in its Master ad
# (LastExitReason) and `gridbus pool up` prints it, so nobody has to go and read the log.
EXIT_REASON_ENV = "GRIDBUS_EXIT_REASON_FILE"

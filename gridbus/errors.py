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

"""gridbus.classad: the ClassAd language, with an API that mirrors HTCondor's ``classad2``.

``import gridbus.classad as classad`` runs code written for classad2. Evaluation follows
HTCondor's daemon semantics (classad2 after ``import htcondor2``): an unscoped name missing from MY
is looked up in TARGET, ``==`` on strings ignores case, the HTCondor extension functions exist.
The daemons' hot path is :func:`compile` (cached by text) and :func:`symmetric_match`.
"""

from gridbus import __version__
from gridbus.classad.adparse import ParserType, parseAds, parseNext, parseOne, quote, unquote
from gridbus.classad.classad import ClassAd, symmetric_match
from gridbus.classad.errors import ClassAdException, ClassAdParseError, last_stream_error
from gridbus.classad.exprtree import Compiled, ExprTree, compile
from gridbus.classad.limits import EvaluationLimitExceeded
from gridbus.classad.values import Value

Parser = ParserType  # classad2 keeps the version-1 name too


def version() -> str:
    """classad2.version(): the version of the ClassAd library, here gridbus's own."""
    return __version__


def lastError() -> str:  # noqa: N802 - classad2's name
    """classad2.lastError(): the last syntax error met reading a stream of ads (parseAds,
    parseNext, parseOne), as classad2's stream parsers set it; every error is also raised, with
    its sentence, by the call that met it."""
    return last_stream_error()


__all__ = [
    "ClassAd",
    "ClassAdException",
    "ClassAdParseError",
    "Compiled",
    "EvaluationLimitExceeded",
    "ExprTree",
    "Parser",
    "ParserType",
    "Value",
    "compile",
    "lastError",
    "parseAds",
    "parseNext",
    "parseOne",
    "quote",
    "symmetric_match",
    "unquote",
    "version",
]

"""The built-in functions: the ClassAd library's core set and HTCondor's extensions.

Each module registers one family in :mod:`.registry`'s tables when it is imported; importing
this package imports them all. The evaluator (:mod:`gridbus.classad.exprtree`) imports it,
hands the compiler :func:`compile_call`, and gives the functions what they call in it through
:func:`.registry.install`.
"""

from gridbus.classad.cnumbers import c_int, c_pow, c_real, f2ll, strtod
from gridbus.classad.functions import (  # noqa: F401 - imported for their registrations
    arguments,
    context,
    conversions,
    environment,
    lists,
    maths,
    names,
    regex,
    stringlists,
    strings,
    times,
    versions,
)
from gridbus.classad.functions.conversions import to_string
from gridbus.classad.functions.registry import LAZY, STRICT, VARIADIC, compile_call, lazy, strict
from gridbus.classad.functions.versions import natural_cmp
from gridbus.classad.scope import type_name
from gridbus.classad.timefmt import format_reltime

__all__ = [
    "LAZY",
    "STRICT",
    "VARIADIC",
    "c_int",
    "c_pow",
    "c_real",
    "compile_call",
    "f2ll",
    "format_reltime",
    "lazy",
    "natural_cmp",
    "strict",
    "strtod",
    "to_string",
    "type_name",
]

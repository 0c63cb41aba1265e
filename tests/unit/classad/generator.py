"""Random ClassAd expressions over every operator, literal kind, scope and many functions."""

from __future__ import annotations

import random

INTS = ["0", "1", "2", "3", "7", "-1", "-7", "100", "1024", "9223372036854775807"]
REALS = ["0.0", "1.5", "2.5", "-3.25", "1e3", ".5", "1E-2"]
STRINGS = ['"abc"', '"ABC"', '""', '"LINUX"', '"linux"', '"a,b,c"', '"x y"', '"1.2.3"', '"a\\"b"', '"alice@example.org"']
KEYWORDS = ["true", "false", "undefined", "error", "TRUE", "Undefined"]
ATTRS = ["Cpus", "Memory", "OpSys", "Name", "RequestCpus", "RequestMemory", "Owner", "x", "y", "L", "N", "missing", "S"]
SCOPES = ["", "", "MY.", "TARGET.", "my.", "target."]
BINARY = ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "=?=", "=!=", "is", "isnt",
          "&&", "||", "&", "|", "^", "<<", ">>", ">>>"]
UNARY = ["-", "+", "!", "~"]
FUNCS = {
    "isUndefined": 1, "isError": 1, "isString": 1, "isInteger": 1, "isReal": 1, "isList": 1, "isClassAd": 1,
    "isBoolean": 1, "identicalMember": 2, "size": 1, "avg": 1,
    "strcat": 2, "toUpper": 1, "toLower": 1, "strcmp": 2, "stricmp": 2, "int": 1, "real": 1,
    "string": 1, "bool": 1, "floor": 1, "ceiling": 1, "round": 1, "ifThenElse": 3,
    "regexp": 2, "split": 1,
}
# Not generated yet, because their edge cases on non-string/undefined arguments still differ from
# HTCondor's (see the report in the commit log): versioncmp/versionGT, pow, join, stringListSum,
# stringListSize, quantize, splitUserName, sum/member of odd element types, anyCompare/allCompare
# and substr with undefined arguments, min/max of booleans, stringListsIntersect,
# stringListMember/IMember with non-string or undefined arguments.

MY_AD = ('[ RequestCpus = 2; RequestMemory = 1024; Owner = "alice"; x = y + 1; y = 41; L = { 1, 2, 3 }; '
         'N = [ a = 1; b = "two" ]; S = "a,b,c"; Requirements = TARGET.Cpus >= MY.RequestCpus ]')
TARGET_AD = ('[ Cpus = 4; Memory = 8192; OpSys = "LINUX"; Name = "slot1@node"; x = 7; L = { "a", "B" }; '
             'Requirements = TARGET.RequestMemory <= MY.Memory ]')


def expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth >= 4 or r < 0.3:
        return atom(rng)
    if r < 0.62:
        return f"{expression(rng, depth + 1)} {rng.choice(BINARY)} {expression(rng, depth + 1)}"
    if r < 0.68:
        return f"{rng.choice(UNARY)}{expression(rng, depth + 1)}"
    if r < 0.74:
        return f"({expression(rng, depth + 1)})"
    if r < 0.78:
        return f"{expression(rng, depth + 1)} ? {expression(rng, depth + 1)} : {expression(rng, depth + 1)}"
    if r < 0.80:
        return f"{expression(rng, depth + 1)} ?: {expression(rng, depth + 1)}"
    if r < 0.92:
        name, arity = rng.choice(list(FUNCS.items()))
        return f"{name}({', '.join(expression(rng, depth + 1) for _ in range(arity))})"
    if r < 0.96:
        items = ", ".join(expression(rng, depth + 1) for _ in range(rng.randint(0, 3)))
        return "{" + items + "}" + (f"[{rng.choice(['0', '1', '2'])}]" if rng.random() < 0.5 else "")
    return f"[ a = {expression(rng, depth + 1)}; b = a ].{rng.choice(['a', 'b', 'c'])}"


def atom(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.2:
        return rng.choice(INTS)
    if r < 0.3:
        return rng.choice(REALS)
    if r < 0.45:
        return rng.choice(STRINGS)
    if r < 0.55:
        return rng.choice(KEYWORDS)
    if r < 0.6:
        return rng.choice(["N.a", "N.b", "L[0]", "L[1]", "TARGET.L[1]", "N['b']"])
    return rng.choice(SCOPES) + rng.choice(ATTRS)

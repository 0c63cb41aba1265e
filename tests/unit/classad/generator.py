"""Random ClassAd expressions over every operator, literal kind, scope and function."""

from __future__ import annotations

import random

INTS = ["0", "1", "2", "3", "7", "-1", "-7", "100", "1024", "9223372036854775807"]
REALS = ["0.0", "1.5", "2.5", "-3.25", "1e3", ".5", "1E-2"]
STRINGS = ['"abc"', '"ABC"', '""', '"LINUX"', '"linux"', '"a,b,c"', '"x y"', '"1.2.3"', '"a\\"b"', '"alice@example.org"']
KEYWORDS = ["true", "false", "undefined", "error", "TRUE", "Undefined"]
ATTRS = ["Cpus", "Memory", "OpSys", "Name", "RequestCpus", "RequestMemory", "Owner", "x", "y", "L", "N", "missing", "S"]
SCOPES = ["", "", "MY.", "TARGET.", "my.", "target."]
SHIFT_COUNTS = ["0", "1", "3", "63", "64", "65", "-1", "-64", "100", "9223372036854775807"]
BINARY = ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "=?=", "=!=", "is", "isnt",
          "&&", "||", "&", "|", "^", "<<", ">>", ">>>"]
UNARY = ["-", "+", "!", "~"]
# Every built-in function, with the argument counts it is generated with (name: (fewest, most)).
FUNCS: dict[str, tuple[int, int]] = {
    "isUndefined": (1, 1), "isError": (1, 1), "isString": (1, 1), "isInteger": (1, 1), "isReal": (1, 1),
    "isList": (1, 1), "isClassAd": (1, 1), "isBoolean": (1, 1), "isAbsTime": (1, 1), "isRelTime": (1, 1),
    "member": (2, 2), "identicalMember": (2, 2), "size": (1, 1), "sum": (1, 1), "avg": (1, 1), "min": (1, 1),
    "max": (1, 1), "anyCompare": (3, 3), "allCompare": (3, 3),
    "strcat": (0, 3), "join": (1, 3), "toUpper": (1, 1), "toLower": (1, 1), "substr": (2, 3), "strcmp": (2, 2),
    "stricmp": (2, 2), "versioncmp": (2, 2), "versionLT": (2, 2), "versionLE": (2, 2), "versionGT": (2, 2),
    "versionGE": (2, 2), "versionEQ": (2, 2), "version_in_range": (3, 3),
    "regexp": (2, 3), "regexpMember": (2, 3), "regexps": (3, 4), "replace": (3, 4), "replaceAll": (3, 4),
    "int": (1, 1), "real": (1, 1), "string": (1, 1), "bool": (1, 1), "absTime": (1, 2), "relTime": (1, 1),
    "floor": (1, 1), "ceil": (1, 1), "ceiling": (1, 1), "round": (1, 1), "pow": (2, 2), "quantize": (2, 2),
    "ifThenElse": (3, 3), "interval": (1, 1), "eval": (1, 1), "unparse": (1, 1),
    "getYear": (1, 1), "getMonth": (1, 1), "getDayOfYear": (1, 1), "getDayOfMonth": (1, 1),
    "getDayOfWeek": (1, 1), "getDays": (1, 1), "getHours": (1, 1), "getMinutes": (1, 1), "getSeconds": (1, 1),
    "splitTime": (1, 1), "formatTime": (1, 2),
    "stringListSize": (1, 2), "stringListSum": (1, 2), "stringListAvg": (1, 2), "stringListMin": (1, 2),
    "stringListMax": (1, 2), "stringListMember": (2, 3), "stringListIMember": (2, 3),
    "stringListSubsetMatch": (2, 3), "stringListISubsetMatch": (2, 3), "stringList_regexpMember": (2, 4),
    "stringListsIntersect": (2, 3), "split": (1, 2), "splitUserName": (1, 1), "splitSlotName": (1, 1),
    "splitSinful": (1, 1), "userHome": (1, 2), "userMap": (2, 4), "listToArgs": (1, 1), "argsToList": (1, 1),
    "envV1ToV2": (1, 1), "mergeEnvironment": (0, 3), "evalInEachContext": (2, 2), "countMatches": (2, 2),
}
# Functions whose arguments come from their own pools rather than from random expressions, and why:
# - the time functions: classad2 reads uninitialized memory (different results run to run) for times
#   whose year does not fit a C int, which random integer arithmetic reaches easily;
# - unparse: HTCondor unparses only an attribute reference, and prints lists and ads in a multi-line
#   "pretty" layout that is no part of the language, so scalar attributes are used;
# - envV1ToV2/mergeEnvironment: their parsers are HTCondor's Env class, checked on environment texts.
TIME_FUNCS = {"absTime", "relTime", "getYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDayOfWeek",
              "getDays", "getHours", "getMinutes", "getSeconds", "splitTime", "formatTime", "interval"}
TIME_ARGS = ["0", "1", "-1", "86399", "1700000000", "-90061", "2147483648", "1.5", "-3.25", "1e9", "true", "undefined",
             "error", '"abc"', '""', "{}", "[]", "N", "x", "S", 'absTime("2024-01-02T03:04:05Z")',
             'absTime("2024-02-29T23:59:59+05:30")', 'absTime("1969-12-31T18:00:00-06:00")', "relTime(5)",
             "relTime(-3.5)", "relTime(90061.25)", 'relTime("1+02:03:04")', "relTime(-86401)",
             '"%Y-%m-%d %H:%M:%S %j %a %b %z"', '"%c"', '"%s %e %p"',
             "T", "U"]  # T and U are split-time ads in MY (classad2 prints nested ad literals in hash order)
ENV_ARGS = ['"A=1;B=2"', '"A=1;B=two words"', '"A=\\"q\\""', '"A=1 B=2"', "\"A='x y' B=2\"", '""', '" "',
            '"A"', '"=1"', '"A=1;; ;x"', "undefined", "error", "1", '"A=3"']
UNPARSE_ARGS = ["x", "y", "Owner", "RequestCpus", "missing", "TARGET.x", "MY.y", "Cpus", "1", '"s"', "x + 1"]
# Left out, because their answers are not functions of their arguments: random() and the clocks
# (time, currentTime, dayTime, timeZoneOffset); absTime() and formatTime() are generated only with
# arguments for the same reason.

MY_AD_CORE = ('[ RequestCpus = 2; RequestMemory = 1024; Owner = "alice"; x = y + 1; y = 41; L = { 1, 2, 3 }; '
              'N = [ a = 1; b = "two" ]; S = "a,b,c"; Requirements = TARGET.Cpus >= MY.RequestCpus ]')
# Plus two split-time ads for formatTime (kept out of the printing tests: classad2 prints the
# attributes of a nested ad in hash order).
MY_AD = MY_AD_CORE[:-1] + "; T = [ Year = 2024; Month = 2; Day = 29; Hours = 1 ]; U = [ Year = 2024; Month = 13; Day = 0 ] ]"

TARGET_AD = ('[ Cpus = 4; Memory = 8192; OpSys = "LINUX"; Name = "slot1@node"; x = 7; L = { "a", "B" }; '
             'Requirements = TARGET.RequestMemory <= MY.Memory ]')


def expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth >= 4 or r < 0.3:
        return atom(rng)
    if r < 0.62:
        op = rng.choice(BINARY)
        if op in ("<<", ">>", ">>>") and rng.random() < 0.5:  # counts outside 0..63 too
            return f"{expression(rng, depth + 1)} {op} {rng.choice(SHIFT_COUNTS)}"
        return f"{expression(rng, depth + 1)} {op} {expression(rng, depth + 1)}"
    if r < 0.68:
        return f"{rng.choice(UNARY)}{expression(rng, depth + 1)}"
    if r < 0.74:
        return f"({expression(rng, depth + 1)})"
    if r < 0.78:
        return f"{expression(rng, depth + 1)} ? {expression(rng, depth + 1)} : {expression(rng, depth + 1)}"
    if r < 0.80:
        return f"{expression(rng, depth + 1)} ?: {expression(rng, depth + 1)}"
    if r < 0.92:
        return call(rng, depth)
    if r < 0.96:
        items = ", ".join(expression(rng, depth + 1) for _ in range(rng.randint(0, 3)))
        return "{" + items + "}" + (f"[{rng.choice(['0', '1', '2'])}]" if rng.random() < 0.5 else "")
    if r < 0.98:
        return f"[ a = {expression(rng, depth + 1)}; b = a ].{rng.choice(['a', 'b', 'c'])}"
    # Subscripts inside nested ads, and selections from subscripted ads and lists.
    return rng.choice([f"[ a = {expression(rng, depth + 1)}; b = L[a] ].b", "[ a = N; b = a[\"a\"] ].b",
                       "[ a = { [ x = 1 ], [ x = 2 ] }; b = a[1].x ].b", f"[ a = {{ {expression(rng, depth + 1)} }}; b = a[0] ].b",
                       'N["a"]', "[ n = [ m = 1 ] ].n", "{ [ q = 3 ] }[0].q"])
    # Not generated: a selection from ad["name"] when that is itself an ad (`A["g"].s`). classad2
    # answers undefined there by reading a temporary ad after freeing it, and in a long run the same
    # use-after-free crashes the process; gridbus answers undefined, as classad2 normally does.


def call(rng: random.Random, depth: int) -> str:
    name = rng.choice(list(FUNCS))
    while depth > 0 and name in ("evalInEachContext", "countMatches"):
        # Only as a whole expression: classad2's lookup of the first argument leaves its
        # evaluation state changed, so TARGET references evaluated after it in the same expression
        # (or in the list argument) answer from the wrong ad.
        name = rng.choice(list(FUNCS))
    lo, hi = FUNCS[name]
    n = rng.randint(lo, hi)
    if name in TIME_FUNCS:
        args = [rng.choice(TIME_ARGS) for _ in range(n)]
    elif name in ("envV1ToV2", "mergeEnvironment"):
        args = [rng.choice(ENV_ARGS) for _ in range(n)]
    elif name == "unparse":
        args = [rng.choice(UNPARSE_ARGS)]
    elif name in ("evalInEachContext", "countMatches"):
        # The first argument is evaluated in each nested ad with its own attributes; nested ad
        # literals inside it resolve names against the context ad in classad2, so none are used.
        args = [rng.choice(["a", "b", "a + 1", "x", "MY.y", "a == 1", "isUndefined(b)", "Cpus", "b ?: a", "1", "N",
                            "strcat(a, b)", "a > 1 && b < 4"]),
                rng.choice(["{ [ a = 1 ], [ a = 2; b = 3 ], [ ] }", "{ [ a = x ], [ b = 5 ] }", "undefined", "{}", "N",
                            "{ 1, [ a = true ] }"])]
    else:
        args = [expression(rng, depth + 1) for _ in range(n)]
    return f"{name}({', '.join(args)})"


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
        return rng.choice(["N.a", "N.b", "L[0]", "L[1]", "TARGET.L[1]", "N['x']", 'N["b"]'])
    return rng.choice(SCOPES) + rng.choice(ATTRS)


# Circular references: nested ads whose attributes refer to each other or to themselves, wrapped in
# random expressions and tests of what a cycle gives (`is undefined`, isError, ?:).
CYCLE_WRAPS = ["{}", "{} is undefined", "{} isnt undefined", "isError({})", "isUndefined({})", "{} ?: 5",
               "ifThenElse({} is undefined, 1, 2)", "{} + 1", "{} || true", "{} && false", "strcat({}, \"x\")",
               "{{ {} }}", "size({{ {} }})", "{} =?= error"]


def cyclic_ad(rng: random.Random) -> tuple[str, str]:
    """An ad with a cycle among a, b and c, and the name of one of them."""
    def ref(names: str) -> str:
        wrap = rng.choice(CYCLE_WRAPS)
        inner = rng.choice(names)
        if rng.random() < 0.4:
            inner = f"{inner} {rng.choice(BINARY)} {expression(rng, 3)}"
        return wrap.format(inner)

    shape = rng.random()
    if shape < 0.25:  # a self-reference
        ad = f"[ a = {ref('a')}; b = {expression(rng, 3)} ]"
    elif shape < 0.65:  # two attributes referring to each other
        ad = f"[ a = {ref('b')}; b = {ref('a')}; c = {ref('ab')} ]"
    elif shape < 0.85:  # a longer ring
        ad = f"[ a = {ref('b')}; b = {ref('c')}; c = {ref('a')} ]"
    else:  # through a nested ad
        ad = f"[ a = [ x = {ref('ab')} ].x; b = {ref('a')} ]"
    return ad, rng.choice(["a", "b", "c"])


def cyclic(rng: random.Random) -> str:
    """An expression selecting an attribute from an ad with a cycle among a, b and c."""
    ad, sel = cyclic_ad(rng)
    return rng.choice([f"{ad}.{sel}", f"{rng.choice(CYCLE_WRAPS).format(ad + '.' + sel)}"])

"""A corpus of ClassAd expressions, ads and matches written for these tests (nothing is read from
outside the repository): every built-in function family with ordinary, edge and wrong-typed
arguments, made from templates at import, and a few ads with evaluations and matches. The answers
come from HTCondor's library (classad2), the oracle."""

from __future__ import annotations

import itertools

# Argument values of each kind, edge cases among them.
STRINGS = ['"abc"', '""', '"Hello, World"', '"a,b, c"', '"  spaced  "', '"MiXeD"', "undefined", "error", "3"]
NUMBERS = ["0", "1", "-7", "2.5", "-0.5", "1e10", "9223372036854775807", "undefined", "error", '"4"', "true"]
LISTS = ["{}", "{1, 2, 3}", '{"a", "b"}', "{1, 2.5, -3}", '{1, "x", undefined}', "undefined", '"x"']

ONE_STRING = ["strlen", "toUpper", "toLower", "size", "isString", "isUndefined", "isError", "int", "real",
              "string", "bool"]
ONE_NUMBER = ["floor", "ceiling", "round", "int", "real", "string", "isInteger", "isReal", "abs",
              "pow(2, {})", "quantize({}, 2)", "quantize({}, {{1, 5, 10}})"]
ONE_LIST = ["size", "sum", "avg", "min", "max", "isList", "member(1, {})", "identicalMember(1, {})",
            "anyCompare(\"<\", {}, 2)", "allCompare(\">=\", {}, 0)"]
STRING_PAIRS = ["strcmp", "stricmp", "versioncmp", "version_gt", "version_le", "stringListMember",
                "stringListIMember", "regexp", "substr({}, 1)"]
STRINGLIST = ['"a,b,c"', '"1, 2, 3"', '""', '"x;y;z"', '"a b,c"']
STRINGLIST_FNS = ["stringListSize", "stringListSum", "stringListAvg", "stringListMin", "stringListMax",
                  "stringListsIntersect({}, \"b,x\")", "stringListSubsetMatch(\"a\", {})", "split"]
OTHERS = [
    'substr("abcdef", 2, 3)', 'substr("abcdef", -2)', 'substr("abcdef", 10)', 'substr("abc", 1, -1)',
    'strcat("a", 1, 2.5, true)', 'strcat()', 'strcat("x", undefined)', 'join(",", {"a", "b"})',
    'join(", ", "a", "b", 3)', 'join({"a"})', 'splitUserName("alice@example.org")', 'splitUserName("bob")',
    'splitSlotName("slot1_2@host")', 'splitSlotName("host")', 'regexp("^a.c$", "abc")', 'regexp("A", "abc", "i")',
    'regexp("(", "abc")', 'regexps("a(b)c", "xabcx", "[\\\\1]")', 'replace("o", "foo", "0")', 'replaceAll("o", "foo", "0")',
    'regexpMember("^b", {"abc", "bcd"})', 'ifThenElse(true, 1, 2)', 'ifThenElse(false, 1, 2)', 'ifThenElse(undefined, 1, 2)',
    'ifThenElse(3, "y", "n")', 'ifThenElse("s", 1, 2)', 'unparse(1 + 2)', 'eval("1 + 2 * 3")', 'eval("x")',
    'random(1) < 1', 'pow(2, 10)', 'pow(2.0, -1)', 'pow(0, 0)', 'pow(-8, 0.5)', 'log(1)', 'exp(0)',
    'int("12abc")', 'real("1e3")', 'real("x")', 'string({1, 2})', 'bool("true")', 'bool("yes")', 'bool(0)',
    'interval(3661)', 'interval(-5)', 'formatTime(0, "%Y-%m-%d")', 'formatTime(86400 * 365, "%j")',
    'absTime("2024-05-01T10:00:00Z") - absTime("2024-05-01T09:00:00Z")', 'relTime("1+02:03:04")',
    'relTime("-30")', 'splitTime(3661)["Minutes"]', 'splitTime(absTime(0))["Year"]',
    'envV1ToV2("A=1;B=2")', 'mergeEnvironment("A=1", "B=2")', 'toUpper(strcat("a", "b"))',
    '1 / 0', '1 % 0', '7 / 2', '7.0 / 2', '-7 % 3', '1 << 65', '1 >>> 1', '-1 >> 1', '~5', '!true', '3 & 5 | 2 ^ 7',
    '"abc" == "ABC"', '"abc" =?= "ABC"', '"abc" is "abc"', 'undefined == 1', 'undefined =?= undefined',
    'undefined || true', 'undefined && false', 'error || true', '1 < "a"', '{1, 2}[1]', '{1, 2}[5]',
    '[a = 1; b = a + 1].b', '[a = 1].c', '[a = b; b = a].a', '[x = 2].x * 3', 'true ? 1 : 2', 'undefined ?: 4',
    '5 ?: 4', 'member("b", {"a", "b"})', 'member(2, {1, 2.0})', 'identicalMember(2, {1, 2.0})',
]


def functional_expressions() -> list[str]:
    """Every template applied to every argument of its kind, and the standalone expressions."""
    out: list[str] = []

    def apply(fn: str, *args: str) -> str:
        return fn.format(*args) if "{}" in fn else f"{fn}({', '.join(args)})"

    out += [apply(fn, a) for fn in ONE_STRING for a in STRINGS]
    out += [apply(fn, a) for fn in ONE_NUMBER for a in NUMBERS]
    out += [apply(fn, a) for fn in ONE_LIST for a in LISTS]
    pairs = ['"abc"', '"ABC"', '"1.10"', '"1.9"', '"a"', "undefined"]
    for fn in STRING_PAIRS:
        out += [apply(fn, a, b) for a, b in itertools.product(pairs, repeat=2) if "{}" not in fn] or \
               [apply(fn, a) for a in pairs]
    out += [apply(fn, a) for fn in STRINGLIST_FNS for a in STRINGLIST]
    out += OTHERS
    return list(dict.fromkeys(out))


ADS = {
    "job": '[ Owner = "alice"; RequestMemory = 1024; RequestCpus = 2; ImageSize = 5000; Rank = TARGET.Memory; '
           'Requirements = TARGET.Memory >= MY.RequestMemory && TARGET.Cpus >= RequestCpus && TARGET.OpSys == "LINUX"; '
           'Groups = {"a", "b"}; Nested = [ x = 1; y = x + RequestCpus ] ]',
    "machine": '[ Name = "slot1@host"; Memory = 4096; Cpus = 4; OpSys = "LINUX"; Arch = "X86_64"; '
               'Requirements = TARGET.Owner != "mallory"; Rank = TARGET.RequestCpus; KFlops = 1000 ]',
    "small": '[ Name = "slot2@host"; Memory = 512; Cpus = 1; OpSys = "LINUX"; Requirements = true ]',
    "windows": '[ Name = "win@host"; Memory = 8192; Cpus = 8; OpSys = "WINDOWS"; Requirements = true ]',
    "picky": '[ Name = "picky@host"; Memory = 8192; Cpus = 8; OpSys = "LINUX"; Requirements = TARGET.Owner == "bob" ]',
    "bob": '[ Owner = "bob"; RequestMemory = 100; RequestCpus = 1; Requirements = true ]',
}
EVALS = [
    ("job", "RequestMemory * 2"), ("job", "Requirements"), ("job", "Nested.y"), ("job", "size(Groups)"),
    ("job", "member(\"a\", Groups)"), ("job", "strcat(Owner, \"-\", RequestCpus)"), ("job", "Missing =?= undefined"),
    ("job", "ifThenElse(ImageSize > 4000, \"big\", \"small\")"), ("machine", "Memory / Cpus"),
    ("machine", "Requirements"), ("machine", "regexp(\"^slot\", Name)"), ("machine", "KFlops * 1.5"),
    ("small", "Memory < 1024 && Cpus == 1"), ("windows", "OpSys == \"windows\""),
]
MATCHES = [("match", "job", "machine"), ("no-match", "job", "small"), ("no-match", "job", "windows"),
           ("no-match", "job", "picky"), ("match", "bob", "picky"), ("match", "bob", "small")]


def classad_test_cases() -> tuple[dict[str, str], list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(ads by name, (ad, expression) evaluations, (kind, left, right) matches)."""
    return dict(ADS), list(EVALS), list(MATCHES)

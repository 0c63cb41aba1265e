"""Arguments and environment in HTCondor's two syntaxes, written into the job ad as condor_submit does.

- Old (V1) arguments: the value is kept as written in `Args`; a double quote is not allowed in it.
- New (V2) arguments: the value is wrapped in double quotes; inside, `""` is a double quote, blanks
  separate arguments and single quotes group (`''` is a single quote). The ad gets `Arguments`,
  re-quoted the way HTCondor's ArgList writes V2 (`a b' 'c`).
- Environment: new form `"A=1 B='x y'"`, old form `A=1;B=2`. Either way the ad gets `Environment`
  in the V2 form, variables sorted by name (HTCondor keeps them in a map).
"""

from __future__ import annotations

from gridbus.submit.errors import SubmitError

_BLANK = " \t\r\n"


def is_v2(value: str) -> bool:
    v = value.strip()
    return len(v) >= 2 and v[0] == '"' and v[-1] == '"'


def _unwrap_v2(value: str, what: str) -> str:
    inner = value.strip()[1:-1]
    out: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i] == '"':
            if i + 1 < len(inner) and inner[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            raise SubmitError(f"{what}: a double quote inside the new syntax must be doubled (\"\"): {value}")
        out.append(inner[i])
        i += 1
    return "".join(out)


def split_v2(raw: str, what: str) -> list[str]:
    """Split the inside of a V2 string into words: blanks separate, single quotes group."""
    words: list[str] = []
    cur: list[str] = []
    in_word = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "'":
            in_word = True
            i += 1
            while True:
                if i >= len(raw):
                    raise SubmitError(f"{what}: unbalanced single quote in {raw!r}")
                if raw[i] == "'":
                    if i + 1 < len(raw) and raw[i + 1] == "'":
                        cur.append("'")
                        i += 2
                        continue
                    i += 1
                    break
                cur.append(raw[i])
                i += 1
            continue
        if c in _BLANK:
            if in_word:
                words.append("".join(cur))
                cur, in_word = [], False
            i += 1
            continue
        cur.append(c)
        in_word = True
        i += 1
    if in_word:
        words.append("".join(cur))
    return words


def join_v2(words: list[str]) -> str:
    """HTCondor's ArgList V2 raw form: quote each blank or single quote, merging adjacent quotes."""
    result = ""
    for word in words:
        if result:
            result += " "
        if not word:
            result += "''"
        for ch in word:
            if ch in " \t\n\r'":
                if result.endswith("'"):
                    result = result[:-1]
                else:
                    result += "'"
                if ch == "'":
                    result += "'"
                result += ch + "'"
            else:
                result += ch
    return result


def arguments_attrs(value: str | None) -> dict[str, str]:
    """The ad attribute for an `arguments` value: {"Args": v1} or {"Arguments": v2}."""
    if value is None or value.strip() == "":
        return {"Arguments": ""}
    if is_v2(value):
        return {"Arguments": join_v2(split_v2(_unwrap_v2(value, "arguments"), "arguments"))}
    if '"' in value:
        raise SubmitError(
            f"arguments: found an unescaped double quote in the old syntax: {value} "
            '(wrap the whole value in double quotes to use the new syntax)'
        )
    return {"Args": value.strip()}


def environment_attr(value: str | None) -> str:
    """The V2 `Environment` string for an `environment` value in either syntax."""
    if value is None or value.strip() == "":
        return ""
    if is_v2(value):
        entries = split_v2(_unwrap_v2(value, "environment"), "environment")
    else:
        entries = [e for e in value.split(";") if e.strip()]
    env: dict[str, str] = {}
    for entry in entries:
        name, eq, val = entry.partition("=")
        name = name.strip() if not is_v2(value) else name
        if not eq or not name:
            raise SubmitError(f"environment: {entry!r} is not NAME=VALUE")
        env[name] = val
    return join_v2([f"{k}={env[k]}" for k in sorted(env)])


def words_of(attrs: dict[str, str]) -> list[str]:
    """The argument list a starter would run, from `Args` (V1: split on blanks) or `Arguments` (V2)."""
    if "Arguments" in attrs:
        return split_v2(attrs["Arguments"], "Arguments")
    return attrs.get("Args", "").split()

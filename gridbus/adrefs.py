"""Which attributes a match could look at: the names an expression reaches in either ad.

Shared by the negotiator (which slots are alike for a request) and the schedd (which job
attributes a resource request must carry, so that matching it gives what the full job ad would).

Matchmaking evaluates a job's expressions with the slot as TARGET and the slot's with the job as
TARGET, and an unscoped name missing from MY is looked up in TARGET; so a name an expression
refers to may be read from either ad, and if it holds an expression there, that expression's names
may be read in turn. ``reach`` follows names through the job's expressions and through every
slot's until nothing new appears. Two slots that agree on every reached name answer the job alike;
two jobs that agree on every reached name are answered alike by every slot.

Names are lower-case. ``None`` means "cannot be told" (``eval()`` builds an expression from a
string at run time; a computed subscript picks an attribute by a value; a bare ``TARGET`` or
``MY`` hands a whole ad to a function): callers must then treat every slot and every job as
distinct, or send whole ads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gridbus import classad
from gridbus.classad import nodes as N

# Functions that read attributes whose names are not written in the expression.
_OPAQUE_CALLS = frozenset({"eval"})

# Names that denote a whole ad, not an attribute, when written alone (``size(TARGET)``).
_AD_NAMES = frozenset({"my", "target", "parent", "root"})

_REFS_BY_TEXT: dict[str, frozenset[str] | None] = {}
_REFS_CACHE_MAX = 50_000


def operands(n: N.Node) -> tuple[N.Node, ...] | None:
    """The sub-expressions of an operator node (binary, elvis, chain, unary, parentheses,
    conditional, call), or None for any other kind: the walks here share the operators and
    differ only on names, selections, subscripts, lists and records.

    (``gridbus.classad.exprtree.collect_refs`` walks the same way inside the classad package;
    gridbus.classad offers no children-of-a-node helper to share with it.)
    """
    if type(n) is N.Binary or type(n) is N.Elvis:
        return (n.left, n.right)
    if type(n) is N.Chain:
        return tuple(n.operands)
    if type(n) is N.Unary:
        return (n.operand,)
    if type(n) is N.Paren:
        return (n.inner,)
    if type(n) is N.Conditional:
        return (n.cond, n.then, n.other)
    if type(n) is N.Call:
        return tuple(n.args)
    return None


def follow(roots: Iterable[str], step: Callable[[str], Iterable[str] | None]) -> frozenset[str] | None:
    """Every name reached from ``roots`` (lower-cased) through ``step``, the names one name's
    values look up; None as soon as ``step`` answers None (cannot be told)."""
    seen: set[str] = set()
    todo = [r.lower() for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        more = step(name)
        if more is None:
            return None
        todo.extend(more)
    return frozenset(seen)


def node_refs(node: N.Node) -> frozenset[str] | None:
    """Every attribute name (lower-case, any scope) a syntax tree may look up, or None."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is N.AttrRef:
            if n.lname in _AD_NAMES and not n.scope:
                return None  # the whole ad is read: which of its attributes cannot be told
            out.add(n.lname)
        elif type(n) is N.Literal:
            continue
        elif type(n) is N.Call and n.lname in _OPAQUE_CALLS:
            return None
        elif type(n) is N.ListExpr:
            stack += n.items
        elif type(n) is N.RecordExpr:
            stack += [v for _, v in n.attrs]
        elif type(n) is N.Select:
            # `ad.name` falls back to the ads enclosing `ad`, so the name may be read from MY too.
            out.add(n.lname)
            if not _is_ad_name(n.base):
                stack.append(n.base)
        elif type(n) is N.Subscript:
            index = n.index
            if type(index) is N.Literal:
                if isinstance(index.value, str):
                    out.add(index.value.lower())
            else:
                return None  # `ad[expr]` names an attribute only at run time
            stack.append(index)
            if not _is_ad_name(n.base):
                stack.append(n.base)
        else:
            kids = operands(n)
            if kids is None:
                return None  # a node kind this walker does not know: assume the worst
            stack += kids
    return frozenset(out)


def _is_ad_name(node: N.Node) -> bool:
    """``TARGET`` in ``TARGET.x`` or ``TARGET["x"]``: a scope whose attribute is named beside it."""
    return type(node) is N.AttrRef and node.lname in _AD_NAMES and not node.scope


def value_refs(value: Any) -> frozenset[str] | None:
    """The names an attribute value may look up when evaluated (empty for plain values)."""
    if isinstance(value, classad.ExprTree):
        text = str(value)
        refs = _REFS_BY_TEXT.get(text, False)
        if refs is False:
            refs = node_refs(classad.compile(value).node)
            if len(_REFS_BY_TEXT) >= _REFS_CACHE_MAX:
                _REFS_BY_TEXT.clear()
            _REFS_BY_TEXT[text] = refs
        return refs  # type: ignore[return-value]  # False (not cached) was replaced just above
    items: Iterable[Any]
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    elif isinstance(getattr(value, "_data", None), dict):  # a ClassAd nested in a plain ad
        items = value._data.values()
    else:
        return frozenset()
    out: set[str] = set()
    for v in items:  # a nested ad's expressions are evaluated when selected
        more = value_refs(v)
        if more is None:
            return None
        out |= more
    return frozenset(out)


class SlotRefs:
    """For each attribute name, the names any slot's value of it may look up (over the pool)."""

    def __init__(self, lowered_ads: Iterable[dict[str, Any]]):
        self.refs: dict[str, set[str]] = {}
        self.opaque: set[str] = set()  # names some slot holds an opaque expression under
        for low in lowered_ads:
            for name, value in low.items():
                if type(value) in (int, float, str, bool) or value is None:
                    continue
                more = value_refs(value)
                if more is None:
                    self.opaque.add(name)
                elif more:
                    self.refs.setdefault(name, set()).update(more)


def reach(job_low: dict[str, Any], roots: Iterable[str], slots: SlotRefs) -> frozenset[str] | None:
    """Every name reachable from ``roots`` through the job's and the slots' expressions."""

    def step(name: str) -> Iterable[str] | None:
        if name in slots.opaque:
            return None
        more: Iterable[str] = slots.refs.get(name, ())
        value = job_low.get(name)
        if value is not None and type(value) not in (int, float, str, bool):
            job_more = value_refs(value)
            if job_more is None:
                return None
            more = [*more, *job_more]
        return more

    return follow(roots, step)


def is_plain(value: Any) -> bool:
    """A value that looks nothing up when evaluated (a literal)."""
    return type(value) in (int, float, str, bool) or value is None


def closure(ad_low: dict[str, Any], roots: Iterable[str]) -> frozenset[str] | None:
    """Every name reached from ``roots`` through one ad's own expressions (``ad_low`` is keyed by
    lower-case names); None when an expression on the way reads what cannot be named."""

    def step(name: str) -> Iterable[str] | None:
        value = ad_low.get(name)
        return () if is_plain(value) else value_refs(value)

    return follow(roots, step)


_LOWER_KEYS: dict[tuple[Any, ...], tuple[str, ...] | None] = {}
_LOWER_KEYS_MAX = 1024


def lowered(ad: dict[str, Any]) -> dict[str, Any]:
    """The ad keyed by lower-case names (keys that are not strings left out). The lower-case
    names are cached per ad shape (its keys, in order): a startd's slots share one, so a pool of
    200,000 slot ads costs a tuple and a dict per ad instead of a lower() per attribute."""
    keys = tuple(ad)
    low = _LOWER_KEYS.get(keys, False)
    if low is False:
        low = tuple(k.lower() for k in keys) if all(type(k) is str for k in keys) else None
        if len(_LOWER_KEYS) >= _LOWER_KEYS_MAX:
            _LOWER_KEYS.clear()
        _LOWER_KEYS[keys] = low
    if low is None:
        return {k.lower(): v for k, v in ad.items() if isinstance(k, str)}
    return dict(zip(low, ad.values(), strict=True))  # type: ignore[arg-type]  # low holds str keys once not None


def slot_job_refs(lowered_slot_ads: Iterable[dict[str, Any]] | SlotRefs) -> frozenset[str] | None:
    """Every name an expression of any of these slot ads may read, and so may look up in a job
    matched to it (HTCondor's AutoClusterAttrs, which its negotiator learns from the Machine
    ads): a superset of what START, Requirements and Rank reach through the slot's own
    expressions, whatever the path. None when some slot expression reads what cannot be named.
    Takes the lower-cased ads, or their :class:`SlotRefs` when already made."""
    refs = lowered_slot_ads if isinstance(lowered_slot_ads, SlotRefs) else SlotRefs(lowered_slot_ads)
    if refs.opaque:
        return None
    out: set[str] = set()
    for names in refs.refs.values():
        out |= names
    return frozenset(out)

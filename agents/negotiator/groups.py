"""Accounting groups with hierarchical quotas, as HTCondor's negotiator has them.

Configuration (HTCondor's knobs): ``GROUP_NAMES`` lists the groups, a '.' in a name making it a
subgroup of the group before it (``group_physics.hep``); ``GROUP_QUOTA_<g>`` is a static quota in
slot weight (cpus), ``GROUP_QUOTA_DYNAMIC_<g>`` a fraction of the parent's quota;
``GROUP_ACCEPT_SURPLUS`` (and ``_<g>``) lets a group go past its quota with what other groups leave
unused; ``GROUP_AUTOREGROUP`` (and ``_<g>``) lets a group's submitters negotiate again with the
``<none>`` group once every group has had its turn. Group names are case-insensitive.

A job belongs to the group its ``AcctGroup`` names (the longest configured group that is it or a
prefix of it, else ``<none>``) and is accounted as ``<AcctGroup>.<AcctGroupUser or Owner>``.

Each cycle (HTCondor's hierarchical group quotas):

1. Quotas, top down. ``<none>`` holds the whole pool. A node's static children get their quotas,
   scaled down together when they add up to more than the node's (unless
   NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION); the dynamic ones share what is left by their
   fractions (scaled down when those add up to more than 1). What the children do not take is the
   node's own, for the submitters charged to the node itself.
2. Allocations. Each group is allotted ``min(quota, demand)``; what groups leave unused (surplus)
   goes, bottom up, to peers that accept surplus and want more, in proportion to their quotas,
   then up to the parent and over to its other children. A group that does not accept surplus is
   a hard cap on what its whole subtree holds.
3. Order. Groups are negotiated one at a time, the most starving first (the smallest usage as a
   fraction of quota), ``<none>`` last; within a group, its submitters by user priority, as
   without groups.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gridbus.config import truth

NONE = "<none>"


@dataclass
class Group:
    """One node of the group tree, with this cycle's figures (HTCondor's group accountant ad)."""

    name: str
    parent: Group | None = None
    children: list[Group] = field(default_factory=list)
    static: float | None = None  # GROUP_QUOTA_<g>
    dynamic: float | None = None  # GROUP_QUOTA_DYNAMIC_<g>
    accept_surplus: bool = False
    autoregroup: bool = False
    # This cycle's:
    quota: float = 0.0  # the subtree's quota (HTCondor's SubtreeQuota)
    own_quota: float = 0.0  # the quota of the submitters charged to this node itself (EffectiveQuota)
    demand: float = 0.0  # slot weight its own submitters hold or ask for (Requested)
    usage: float = 0.0  # slot weight its own submitters hold (ResourcesUsed)
    allocated: float = 0.0  # slot weight its own submitters may hold this cycle, surplus included

    def walk(self) -> Iterable[Group]:
        yield self
        for c in self.children:
            yield from c.walk()

    def ad(self) -> dict[str, Any]:
        """The group's record in GetPriorities (the accountant ad's group attributes)."""
        return {
            "Name": self.name,
            "AccountingGroup": self.name,
            "IsAccountingGroup": True,
            "ConfigQuota": self.static if self.static is not None else (self.dynamic or 0.0),
            "DynamicQuota": self.dynamic is not None,
            "EffectiveQuota": round(self.own_quota, 4),
            "SubtreeQuota": round(self.quota, 4),
            "SurplusPolicy": "byquota" if self.accept_surplus else "no",
            "AcceptSurplus": self.accept_surplus,
            "Autoregroup": self.autoregroup,
            "Requested": round(self.demand, 4),
            "ResourcesUsed": round(self.usage, 4),
            "GroupResourcesAllocated": round(self.allocated, 4),
            "GroupSortKey": round(self.sort_key(), 6),
        }

    def sort_key(self) -> float:
        """HTCondor's starvation order: usage as a fraction of quota, smallest first; <none> and
        groups without quota last."""
        if self.name == NONE:
            return math.inf
        if self.own_quota <= 0:
            return 1e9 + self.usage
        return self.usage / self.own_quota


def _number(value: Any, knob: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{knob} must be a number, not {value!r}") from None
    if not math.isfinite(out) or out < 0:
        raise ValueError(f"{knob} must be a non-negative number, not {value!r}")
    return out


@dataclass
class GroupConfig:
    """The group tree as configured."""

    root: Group
    by_name: dict[str, Group]  # lower-cased name -> group
    oversubscription: bool = False  # NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION

    @property
    def enabled(self) -> bool:
        return len(self.by_name) > 1

    @classmethod
    def none(cls) -> GroupConfig:
        root = Group(NONE, accept_surplus=True)
        return cls(root, {NONE: root})

    @classmethod
    def from_knobs(cls, names: Iterable[str], lookup: Callable[[str], Any], oversubscription: bool = False) -> GroupConfig:
        """The tree of GROUP_NAMES, each group's knobs read through ``lookup(knob)`` (None: unset)."""
        accept_all = lookup("GROUP_ACCEPT_SURPLUS")
        accept_default = truth(accept_all, "GROUP_ACCEPT_SURPLUS") if accept_all is not None else False
        regroup_all = lookup("GROUP_AUTOREGROUP")
        regroup_default = truth(regroup_all, "GROUP_AUTOREGROUP") if regroup_all is not None else False
        out = cls.none()
        out.oversubscription = oversubscription
        # The root accepts the pool's surplus: the <none> group is whatever groups leave.
        wanted = [str(n).strip() for n in names if str(n).strip()]
        for name in sorted(wanted, key=lambda n: n.count(".")):  # parents before their children
            key = name.lower()
            if key == NONE or key in out.by_name:
                raise ValueError(f"GROUP_NAMES lists {name!r} twice" if key != NONE else "GROUP_NAMES cannot list <none>")
            parent_key = key.rsplit(".", 1)[0] if "." in key else NONE
            parent = out.by_name.get(parent_key)
            if parent is None:
                raise ValueError(f"group {name!r} is a subgroup of {parent_key!r}, which GROUP_NAMES does not list")
            group = Group(name, parent)
            static, dynamic = lookup(f"GROUP_QUOTA_{name}"), lookup(f"GROUP_QUOTA_DYNAMIC_{name}")
            if static is not None and dynamic is not None:
                raise ValueError(f"group {name!r} has both GROUP_QUOTA_{name} and GROUP_QUOTA_DYNAMIC_{name}")
            if static is not None:
                group.static = _number(static, f"GROUP_QUOTA_{name}")
            elif dynamic is not None:
                group.dynamic = _number(dynamic, f"GROUP_QUOTA_DYNAMIC_{name}")
                if group.dynamic > 1.0:
                    raise ValueError(f"GROUP_QUOTA_DYNAMIC_{name} is a fraction from 0 to 1, not {dynamic!r}")
            accept = lookup(f"GROUP_ACCEPT_SURPLUS_{name}")
            group.accept_surplus = truth(accept, f"GROUP_ACCEPT_SURPLUS_{name}") if accept is not None else accept_default
            regroup = lookup(f"GROUP_AUTOREGROUP_{name}")
            group.autoregroup = truth(regroup, f"GROUP_AUTOREGROUP_{name}") if regroup is not None else regroup_default
            parent.children.append(group)
            out.by_name[key] = group
        return out

    # ------------------------------------------------------------------ membership
    def group_of(self, acct_group: Any) -> Group:
        """The group a job's AcctGroup charges: the longest configured group that is it or its
        prefix (``group_physics.hep.higgs`` is in ``group_physics.hep``), else <none>."""
        if not isinstance(acct_group, str) or not acct_group:
            return self.root
        key = acct_group.strip().lower()
        while key:
            group = self.by_name.get(key)
            if group is not None:
                return group
            key = key.rsplit(".", 1)[0] if "." in key else ""
        return self.root

    def groups(self) -> list[Group]:
        return list(self.root.walk())

    # ------------------------------------------------------------------ this cycle's figures
    def assign(self, pie: float, usage: dict[str, float], demand: dict[str, float]) -> None:
        """Quotas over ``pie`` slot weight, then allocations, from each group's ``usage`` and
        ``demand`` (held plus asked for), keyed by lower-cased group name."""
        for g in self.root.walk():
            g.usage = usage.get(g.name.lower(), 0.0)
            g.demand = max(demand.get(g.name.lower(), 0.0), g.usage)
        self.root.quota = pie
        self._quotas(self.root)
        wanted = {id(g): self._usable(g) for g in self.root.walk()}
        self._allocate(self.root, pie, wanted)

    def _quotas(self, node: Group) -> None:
        statics = [c for c in node.children if c.static is not None]
        dynamics = [c for c in node.children if c.static is None]
        total_static = sum(c.static or 0.0 for c in statics)
        scale = 1.0
        if total_static > node.quota and total_static > 0 and not self.oversubscription:
            scale = node.quota / total_static
        for c in statics:
            c.quota = (c.static or 0.0) * scale
        rest = max(0.0, node.quota - sum(c.quota for c in statics))
        fractions = sum(c.dynamic or 0.0 for c in dynamics)
        fscale = 1.0 / fractions if fractions > 1.0 else 1.0
        for c in dynamics:
            c.quota = rest * (c.dynamic or 0.0) * fscale
        node.own_quota = max(0.0, node.quota - sum(c.quota for c in node.children))
        for c in node.children:
            self._quotas(c)

    def _usable(self, node: Group) -> float:
        """The slot weight the subtree can use: its demand, capped by the quotas of the groups
        that do not accept surplus."""
        own = node.demand if node.accept_surplus else min(node.demand, node.own_quota)
        total = own + sum(self._usable(c) for c in node.children)
        return total if node.accept_surplus else min(total, node.quota)

    def _allocate(self, node: Group, available: float, wanted: dict[int, float]) -> None:
        """Share ``available`` (what the subtree may hold) among the node's own submitters and
        its children: each its quota as far as it can use it, then the surplus to those that
        accept it, in proportion to their quotas."""
        # The members: the node's own submitters (as a member of quota own_quota) and each child.
        members: list[tuple[Group | None, float, float, bool]] = []  # (child or None, quota, wants, accepts)
        own_wants = node.demand if node.accept_surplus else min(node.demand, node.own_quota)
        members.append((None, node.own_quota, own_wants, node.accept_surplus))
        for c in node.children:
            members.append((c, c.quota, wanted[id(c)], c.accept_surplus))
        given = [min(q, w) for _c, q, w, _a in members]
        total = sum(given)
        if total > available and total > 0:  # a pool smaller than its quotas (oversubscribed)
            given = [x * available / total for x in given]
        left = available - sum(given)
        # Water-fill the surplus among accepting members, by quota (equal shares when none has one).
        for _ in range(len(members) + 1):
            hungry = [i for i, (_c, q, w, a) in enumerate(members) if a and w - given[i] > 1e-9]
            if left <= 1e-9 or not hungry:
                break
            weights = {i: members[i][1] for i in hungry}
            if sum(weights.values()) <= 0:
                weights = {i: 1.0 for i in hungry}
            wsum = sum(weights.values())
            spent = 0.0
            for i in hungry:
                extra = min(left * weights[i] / wsum, members[i][2] - given[i])
                given[i] += extra
                spent += extra
            left -= spent
        node.allocated = given[0]
        for (child, _q, _w, _a), share in zip(members[1:], given[1:], strict=True):
            if child is not None:
                self._allocate(child, share, wanted)

    def order(self) -> list[Group]:
        """The groups in negotiation order: most starving first, <none> last."""
        return sorted(self.root.walk(), key=lambda g: (g.sort_key(), g.name.lower()))

"""Who may act on whose jobs: a job's owner, a queue super user (QUEUE_SUPER_USERS, read from
the settings each time, so a reconfig applies at once) or an administrator of the schedd."""

from __future__ import annotations

from collections.abc import Callable

from gridbus.agents.schedd.jobqueue import Proc
from gridbus.agents.schedd.settings import ScheddSettings


class Users:
    def __init__(self, settings: ScheddSettings, is_admin: Callable[[str | None], bool]):
        self.settings = settings
        self._is_admin = is_admin

    def is_super(self, user: str | None) -> bool:
        return bool(user) and (user in self.settings.super_users or self._is_admin(user))

    def may_act(self, user: str | None, p: Proc) -> bool:
        return bool(user) and (user == p.cluster.owner or self.is_super(user))

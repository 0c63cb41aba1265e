"""A static slot matched twice on out-of-date ads: the second RequestClaim, for another job, is
refused instead of being answered as a retry of the first (which handed the schedd the claim its
first job was being started on, and left that job reserved for ever, never running)."""

from __future__ import annotations

import pytest

from gridbus.agents.startd import CLAIM_REFUSED
from gridbus.console import Session
from gridbus.status import Status
from tests.integration.startd.helpers import startd_and_schedd

pytestmark = pytest.mark.broker


def test_a_second_match_of_a_claimed_static_slot_is_refused_and_a_retry_is_not(amqp_url, tmp_path):
    with startd_and_schedd(amqp_url, tmp_path, "r1", num_slots=1) as (startd, _t, schedd), \
            Session(amqp_url, timeout=10) as s:
        (slot,) = startd.table.slots.values()
        claim_id = slot.claim_id  # what the Machine ad showed while the slot was unclaimed

        def claim(gid: str):
            return s.call(startd.address, "RequestClaim", {"ClaimId": claim_id, "Schedd": schedd.address,
                                                          "JobAd": {"Owner": "alice", "GlobalJobId": gid},
                                                          "LeaseDuration": 60})

        first, retry, other = claim("s#1.0#1"), claim("s#1.0#1"), claim("s#2.0#1")
        assert first.status == retry.status == 0 and retry.ClaimId == first.ClaimId
        assert other.status == Status.USER + CLAIM_REFUSED, other.text
        assert "already claimed, for job s#1.0#1" in other.text

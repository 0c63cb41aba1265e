"""The user job event log in HTCondor's format: `writer` appends events, `JobEventLog` reads them."""

from gridbus.eventlog.reader import JobEvent, JobEventLog, JobEventType, parse_event

__all__ = ["JobEvent", "JobEventLog", "JobEventType", "parse_event"]

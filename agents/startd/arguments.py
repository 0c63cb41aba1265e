"""A job's argv and environment from its ad, for the starter.

The quoting rules themselves live in `gridbus.jobargs`, shared with condor_submit's side
(`gridbus.submit.quoting`), so what submit writes is exactly what the starter reads. This module
keeps the starter's names: `job_argv`/`job_environment` read Arguments-else-Args and
Environment-else-Env; `quoted_v2` turns a submit file's double-quoted form into the raw form for
tools and tests that start from submit syntax.
"""

from __future__ import annotations

from gridbus.jobargs import (
    ArgumentError,
    job_argv,
    job_environment,
    lookup,
    parse_env_v1,
    parse_environment_v2,
    split_v1,
    split_v2,
    unquote_submit_v2,
)

__all__ = [
    "ArgumentError", "job_argv", "job_environment", "lookup", "parse_env_v1", "parse_environment_v2",
    "quoted_v2", "split_v1", "split_v2",
]


def quoted_v2(text: str) -> str:
    """The raw V2 form of a submit file's double-quoted string (`gridbus.jobargs.unquote_submit_v2`)."""
    return unquote_submit_v2(text, "arguments")

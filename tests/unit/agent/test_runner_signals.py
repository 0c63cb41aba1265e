"""A daemon started with signals ignored (a shell's `cmd &`, nohup) passes none of them on."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# The signals a Python process may set: glibc keeps 32 and 33 for its threads, and one that came
# ignored from whoever started the test stays so (the fast spawn's child resets those too).
_SETTABLE = {int(s) for s in signal.valid_signals()}


def _ignored(status: str) -> set[int]:
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))} & _SETTABLE


def test_a_daemon_puts_the_signals_it_was_started_with_ignored_back_to_their_defaults():
    """As a daemon's `run` does at its start: what it inherited ignored (here SIGHUP, SIGQUIT and
    SIGUSR2, as nohup and a background shell leave them) is at its default again, so a job it
    starts by subprocess.Popen gets none ignored but what Popen restores itself."""
    script = textwrap.dedent("""
        import signal, subprocess
        from gridbus.agent.runner import default_inherited_ignores
        default_inherited_ignores()
        print(subprocess.run(["grep", "^SigIgn:", "/proc/self/status"], capture_output=True, text=True).stdout)
    """)
    ignore = (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2)

    def parent_ignores() -> None:
        for sig in ignore:
            signal.signal(sig, signal.SIG_IGN)

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, preexec_fn=parent_ignores,
                          check=True)
    assert _ignored(done.stdout) == set()
    # Without the reset the job inherits them (and whatever this test runner was started with
    # ignored: SIGINT, under a background shell): the test can fail.
    plain = subprocess.run([sys.executable, "-c", script.replace("default_inherited_ignores()\n", "")],
                           capture_output=True, text=True, preexec_fn=parent_ignores, check=True)
    assert {int(s) for s in ignore} <= _ignored(plain.stdout)

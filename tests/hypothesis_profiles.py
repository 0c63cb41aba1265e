"""Hypothesis settings profiles and the example counts they scale.

The default profile (``make test``, CI) draws each property test's full count. The ``fast``
profile (``make test-fast``: ``--hypothesis-profile=fast``) draws a fifth of it: hypothesis's own
default of 100 examples becomes 20, and a test that names its count takes it through `examples`,
scaled the same way. Nothing else differs; a property found false in the fast tier is as false.
"""

from __future__ import annotations

from hypothesis import settings

HYPOTHESIS_DEFAULT = 100  # hypothesis's own max_examples, the default profile's


def register_profiles() -> None:
    """Called by tests/conftest.py, before hypothesis's plugin loads the profile asked for."""
    settings.register_profile("fast", max_examples=HYPOTHESIS_DEFAULT // 5)


def examples(full: int) -> int:
    """A test's max_examples: ``full`` under the default profile, scaled as the loaded profile's
    max_examples is to hypothesis's default (at least 10, or ``full`` where that is fewer)."""
    if full <= 0:
        raise ValueError(f"examples: a test draws at least one example, not {full}")
    return max(min(full, 10), full * settings.default.max_examples // HYPOTHESIS_DEFAULT)

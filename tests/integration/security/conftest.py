"""The security tests run pools of real daemons: the e2e harness's fixtures."""

from tests.e2e.conftest import make_pool  # noqa: F401 - a fixture

"""The one compiled part of gridbus: the starter's fast spawn (agents/startd/_spawn.c).

Everything else is in pyproject.toml. The extension is optional: where it cannot be built (no C
compiler), the starter spawns jobs with subprocess.Popen instead and says so in its log.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gridbus.agents.startd._spawn", ["agents/startd/_spawn.c"], optional=True)])

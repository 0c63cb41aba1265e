"""The compose pool without a Docker engine.

There is no Docker engine on these machines, so the compose file is checked against the Compose
Specification's JSON schema (`compose_spec.json`, vendored from the docker-compose 1.29.2 wheel
on PyPI, `compose/config/compose_spec.json`) and against the structure the pool needs; the
Dockerfile's install steps are run for real in a temporary virtualenv, and the installed package
must provide every module the services and their health checks run.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "compose" / "docker-compose.yml"
DOCKERFILE = REPO / "compose" / "Dockerfile"
SPEC = Path(__file__).with_name("compose_spec.json")
DAEMON_SERVICES = {"collector": "collector", "negotiator": "negotiator", "schedd": "schedd",
                   "startd1": "startd", "startd2": "startd"}
# RUN steps that set up the image's system (users, directories) rather than install gridbus;
# they need root in a container and are not run here.
SYSTEM_STEPS = ("useradd ", "mkdir ", "chown ", "apt-get ", "rm ")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_is_valid_against_the_compose_spec_schema(compose: dict) -> None:
    schema = json.loads(SPEC.read_text())
    jsonschema.Draft201909Validator(schema).validate(compose)


def test_the_schema_check_is_not_vacuous() -> None:
    schema = json.loads(SPEC.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft201909Validator(schema).validate({"services": {"x": {"healthcheck": {"test": ["CMD"], "interval": 5, "bogus": 1}}}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft201909Validator(schema).validate({"services": {"x": {"depends_on": {"y": {"condition": "healthy"}}}}})


def test_the_pool_has_rabbitmq_with_management_and_every_daemon(compose: dict) -> None:
    services = compose["services"]
    assert set(services) == {"rabbitmq", *DAEMON_SERVICES}
    rabbit = services["rabbitmq"]
    assert "management" in rabbit["image"]
    assert {"5672:5672", "15672:15672"} <= set(rabbit["ports"])
    assert rabbit["healthcheck"]["test"][0] == "CMD"
    for name in services:
        assert "healthcheck" in services[name], f"{name} has no health check"


@pytest.mark.parametrize("service", sorted(DAEMON_SERVICES))
def test_each_daemon_service_runs_its_module_and_checks_its_own_address(compose: dict, service: str) -> None:
    svc = compose["services"][service]
    kind = DAEMON_SERVICES[service]
    assert svc["depends_on"] == {"rabbitmq": {"condition": "service_healthy"}}
    assert svc["build"]["dockerfile"] == "compose/Dockerfile"
    assert (COMPOSE.parent / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
    module, *args = svc["command"]
    assert module == f"gridbus.agents.{kind}"
    name = args[args.index("--name") + 1]
    test = svc["healthcheck"]["test"]
    assert test[:4] == ["CMD", "python", "-m", "gridbus.agents.master.health"]
    assert test[4] == f"{kind}@{name}"
    env = svc["environment"]
    assert env["GRIDBUS_URL"].startswith("amqp://") and "@rabbitmq:5672/" in env["GRIDBUS_URL"]
    rabbit_env = compose["services"]["rabbitmq"]["environment"]
    user, password = rabbit_env["RABBITMQ_DEFAULT_USER"], rabbit_env["RABBITMQ_DEFAULT_PASS"]
    assert env["GRIDBUS_URL"] == f"amqp://{user}:{password}@rabbitmq:5672/{rabbit_env['RABBITMQ_DEFAULT_VHOST']}"


def test_startds_have_distinct_names(compose: dict) -> None:
    names = {compose["services"][s]["command"][2] for s in ("startd1", "startd2")}
    assert len(names) == 2


def dockerfile_steps() -> list[tuple[str, str]]:
    steps = []
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            steps.append((op.upper(), rest.strip()))
    return steps


def test_dockerfile_entrypoint_and_copies_are_consistent() -> None:
    steps = dockerfile_steps()
    assert steps[0][0] == "FROM" and "python:3.11" in steps[0][1]
    for op, rest in steps:
        if op == "COPY":
            *sources, _dest = rest.split()
            for src in sources:
                assert (REPO / src).exists(), f"COPY {src}: not in the repository"
    entry = json.loads(dict(steps)["ENTRYPOINT"])
    assert entry == ["python", "-m"]


def test_dockerfile_install_steps_run_and_provide_every_service_module(tmp_path: Path) -> None:
    """Replay the COPY steps into a build directory and run the RUN pip steps in a fresh venv."""
    build = tmp_path / "build"
    build.mkdir()
    venv = tmp_path / "venv"
    # Without a pip of its own (ensurepip's copy took seconds): the RUN steps' pip is this run's
    # own, installing into the new venv (pip --python).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    run_as = {"pip": [sys.executable, "-m", "pip", "--python", str(vpy)], "python": [str(vpy)]}
    # The dependencies are found in this test run's own site-packages (appended after the new
    # venv's, so the gridbus installed by the step is the one imported): pip finds them
    # installed and downloads nothing but its build backend, once, into its cache.
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    ran = 0
    for op, rest in dockerfile_steps():
        if op == "COPY":
            *sources, dest = rest.split()
            for src in sources:
                target = build / dest / (Path(src).name if dest.endswith("/") or dest in (".", "./") else "")
                if (REPO / src).is_dir():
                    shutil.copytree(REPO / src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(REPO / src, target)
        elif op == "RUN":
            for part in (p.strip() for p in rest.split("&&")):  # one RUN may chain system steps and pip
                # --no-cache-dir keeps the image small; here pip's cache spares downloading the build
                # backend (setuptools, in pip's isolated build environment) on every run.
                words = [w for w in shlex.split(part) if w != "--no-cache-dir"]
                if part.startswith(SYSTEM_STEPS):
                    continue
                assert words[0] in run_as, f"RUN {part}: an install step this test does not know how to run"
                done = subprocess.run(run_as[words[0]] + words[1:], cwd=build, env=env, capture_output=True, text=True,
                                      timeout=300)
                assert done.returncode == 0, f"RUN {part} failed:\n{done.stdout}\n{done.stderr}"
                ran += 1
    assert ran >= 1
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    modules = sorted({s["command"][0] for s in services.values() if "command" in s}
                     | {s["healthcheck"]["test"][3] for s in services.values() if s["healthcheck"]["test"][1] == "python"})
    probe = ("import importlib, importlib.util, sys, gridbus\n"
             "assert gridbus.__file__.startswith(sys.prefix), gridbus.__file__\n"
             f"for m in {modules!r}:\n"
             "    assert importlib.util.find_spec(m) is not None, m\n"
             "import gridbus.schema; gridbus.schema.builtin().cls('master')\n")
    if shutil.which("cc") or shutil.which("gcc"):  # the image's install has its compiler: the fast spawn is built
        probe += "from gridbus.agents.startd import spawn; assert spawn.AVAILABLE, 'the fast spawn was not built'\n"
    done = subprocess.run([str(vpy), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([str(vpy), "-m", "gridbus.agents.master.health", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "address" in done.stdout, done.stderr

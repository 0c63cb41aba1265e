"""The startd's container part without a container tool: what it advertises, the run command it
builds, the images it accepts (agents/startd/containers.py). Real containers: tests/e2e/test_containers.py."""

from __future__ import annotations

import asyncio
import logging
import resource
import subprocess

import pytest

from gridbus.agents.startd import Startd, containers
from gridbus.agents.startd.accounts import Account
from gridbus.agents.startd.containers import ContainerTool
from gridbus.agents.startd.job import Prepared, StartFailed
from gridbus.agents.startd.settings import StartdSettings


def test_a_startd_without_the_tool_advertises_no_docker(tmp_path):
    settings = StartdSettings(execute=str(tmp_path / "ex"), base_cgroup="", docker="gridbus-no-such-tool")
    ad = Startd("d0", "amqp://guest:guest@127.0.0.1:5672/", settings=settings).ads()[0]
    assert ad["HasDocker"] is False and ad["HasContainer"] is False and ad["HasDockerURL"] is False
    assert "DockerVersion" not in ad


def test_a_found_tool_is_advertised_with_its_version():
    tool = ContainerTool("/usr/bin/podman", "podman version 4.3.1", "vh/a")
    assert containers.attributes(tool) == {"HasDocker": True, "DockerVersion": "podman version 4.3.1",
                                           "HasContainer": True, "HasDockerURL": True}
    assert ContainerTool.find("gridbus-no-such-tool", "vh/a") is None


def test_the_image_is_the_docker_image_or_the_docker_url_of_a_container_job():
    assert containers.image_of({"WantDocker": True, "DockerImage": "busybox:1"}) == "busybox:1"
    assert containers.image_of({"WantContainer": True, "ContainerImage": "docker://busybox"}) == "busybox"
    for ad in ({"WantDocker": True}, {"WantContainer": True, "ContainerImage": "/images/x.sif"}):
        with pytest.raises(StartFailed, match="Cannot start container: invalid image name"):
            containers.image_of(ad)
    assert containers.wanted({"WantDocker": True}) and not containers.wanted({"Cmd": "/bin/true"})


def test_the_run_command_runs_the_job_as_its_account_in_its_scratch_directory():
    tool = ContainerTool("/usr/bin/podman", "podman version 4.3.1", "vh/a", ("--runtime", "runc"))
    account = Account("nobody", 65534, 65534, (65534, 100), "/")
    prep = Prepared(account=account, scratch="/ex/dir_1", iwd="/ex/dir_1", env={"A": "b c"},
                    streams=(subprocess.DEVNULL, 5, 5))
    argv = tool.run_argv("HTCJob1_0_slot1_PID9_1", "busybox:1", prep, {"ClusterId": 1, "ProcId": 0},
                         ["/bin/sh", "-c", "id"], 512, 2.0)
    assert argv[:2] == ["/usr/bin/podman", "run"] and argv[-4:] == ["busybox:1", "/bin/sh", "-c", "id"]
    text = " ".join(argv)
    for part in ("--user 65534:65534", "--group-add 100", "--volume /ex/dir_1:/ex/dir_1", "--workdir /ex/dir_1",
                 "--env A=b c", "--label org.gridbus.startd=vh/a", "--label org.gridbus.job=1.0",
                 "--name HTCJob1_0_slot1_PID9_1", "--runtime runc", "--memory 512m"):
        assert part in text, part
    assert "--interactive" not in argv  # (no In file)
    nofile = argv[argv.index("--ulimit") + 1]  # within the startd's own hard limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or nofile == f"nofile={soft}:{hard}"


FAKE_TOOL = """#!/bin/sh
# A Docker-compatible tool's image commands, on a directory of files named after their images.
cd "$(dirname "$0")"
echo "$*" >> calls.log
case "$1 $2" in
  "image inspect") [ -e "image.$5" ] && echo 2048 && exit 0; echo "Error: $5: image not known" >&2; exit 1;;
  "pull "*) [ "$2" = missing ] && { echo "Error: initializing source $2: no such host" >&2; exit 125; }
            touch "image.$2"; exit 0;;
esac
exit 2
"""


def test_an_image_is_pulled_only_when_absent_and_a_missing_one_holds_with_htcondors_sentence(tmp_path):
    fake = tmp_path / "docker"
    fake.write_text(FAKE_TOOL)
    fake.chmod(0o755)
    tool = ContainerTool(str(fake), "Docker version 0 (fake)", "vh/a")

    async def main() -> tuple[int, int]:
        return await tool.ensure_image("busybox"), await tool.ensure_image("busybox")

    assert asyncio.run(main()) == (2, 2)  # KiB
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["image", "pull", "image", "image"]  # pulled once, then present
    with pytest.raises(StartFailed) as failed:
        asyncio.run(tool.ensure_image("missing"))
    assert failed.value.code == 6
    assert failed.value.reason == ("Cannot start container: invalid image name: missing "
                                   "(Error: initializing source missing: no such host)")


def test_a_tool_whose_engine_does_not_answer_info_is_not_advertised(tmp_path, caplog):
    # A docker command whose daemon is not running answers --version, not info (HTCondor's startd
    # asks both): its slots must not match docker jobs only to fail them.
    tool = tmp_path / "docker"
    tool.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "Docker version 28.2.2"; exit 0; }\n'
                    'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2\nexit 1\n')
    tool.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="gridbus.startd.containers"):
        assert ContainerTool.find(str(tool), "vh/a") is None
    assert "info' did not exit successfully (code 1)" in caplog.text and "Cannot connect to the Docker" in caplog.text
    tool.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Docker version 28.2.2"\nexit 0\n')
    found = ContainerTool.find(str(tool), "vh/a")
    assert found is not None and found.version == "Docker version 28.2.2"

"""Docker and container universe jobs at submit: condor_submit's attributes and Requirements
(as HTCondor 24's condor_submit writes them: WantDocker/DockerImage and TARGET.HasDocker; for a
docker:// container image WantContainer, ContainerImage, WantDockerImage, ContainerImageSource and
TARGET.HasContainer && TARGET.HasDockerURL, each in place of the OpSys clause)."""

from __future__ import annotations

import pytest

from gridbus.submit import Submit, SubmitError


def _ad(text: str) -> dict:
    return Submit(text + "\nqueue\n").build(qdate=0).jobs()[0]


def test_a_docker_job_is_vanilla_with_its_image_and_needs_a_machine_with_docker(recwarn):
    ad = _ad("universe = docker\ndocker_image = busybox:1\nexecutable = /bin/sh")
    assert ad["JobUniverse"] == 5 and ad["WantDocker"] is True and ad["DockerImage"] == "busybox:1"
    req = str(ad["Requirements"])
    assert " && TARGET.HasDocker && (TARGET.Disk >= RequestDisk)" in req and "OpSys" not in req
    assert not [w for w in recwarn if "docker_image" in str(w.message)]  # acted on, no warning


def test_a_container_job_with_a_docker_url_needs_a_machine_that_runs_them():
    ad = _ad("universe = container\ncontainer_image = docker://busybox\nexecutable = /bin/sh")
    assert ad["JobUniverse"] == 5 and ad["WantContainer"] is True and ad["WantDockerImage"] is True
    assert ad["ContainerImage"] == "docker://busybox" and ad["ContainerImageSource"] == "docker"
    assert " && TARGET.HasContainer && TARGET.HasDockerURL && (TARGET.Disk" in str(ad["Requirements"])


def test_a_vanilla_job_keeps_its_opsys_clause_and_no_container_attributes():
    ad = _ad("executable = /bin/sh")
    assert '(TARGET.OpSys == "LINUX")' in str(ad["Requirements"])
    assert not {"WantDocker", "WantContainer", "DockerImage"} & set(ad)


@pytest.mark.parametrize(("text", "message"), [
    ("universe = docker\nexecutable = /bin/sh", "docker jobs require a docker_image"),
    ("universe = container\nexecutable = /bin/sh", "container jobs require a container_image"),
    ("universe = container\ncontainer_image = /images/busybox.sif\nexecutable = /bin/sh", "docker:// images"),
])
def test_a_container_job_without_an_image_it_can_run_is_refused(text, message):
    with pytest.raises(SubmitError, match=message):
        _ad(text)


@pytest.mark.parametrize("universe", ["universe = docker\ndocker_image = busybox:1",
                                      "universe = container\ncontainer_image = docker://busybox"])
def test_a_container_job_may_name_no_executable_and_its_image_command_runs(universe):
    # condor_submit's ad for it: an empty Cmd that does not travel; arguments kept (they replace
    # the image's CMD); nothing of an executable in the sizes.
    ad = _ad(universe + "\narguments = /etc/hosts")
    assert ad["Cmd"] == "" and ad["TransferExecutable"] is False and ad["Args"] == "/etc/hosts"
    assert ad["ExecutableSize"] == ad["DiskUsage"] == 0


def test_a_vanilla_job_still_needs_an_executable():
    with pytest.raises(SubmitError, match="no executable given"):
        _ad("arguments = x")


@pytest.fixture
def never_transfer_absolute(monkeypatch):
    from gridbus.submit import jobad

    monkeypatch.setenv("GRIDBUS_SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD", "true")
    jobad.never_transfer_absolute_container_cmd.cache_clear()
    yield
    jobad.never_transfer_absolute_container_cmd.cache_clear()


def test_a_container_job_s_absolute_executable_travels_unless_the_site_says_it_is_the_image_s(never_transfer_absolute):
    # condor_submit's rule with SUBMIT_CONTAINER_NEVER_XFER_ABSOLUTE_CMD = true (HTCondor 24's
    # default is false, as gridbus's: the executable travels, the other tests here).
    image = _ad("universe = docker\ndocker_image = busybox:1\nexecutable = /bin/sh")
    assert image["Cmd"] == "/bin/sh" and image["TransferExecutable"] is False
    said = _ad("universe = docker\ndocker_image = busybox:1\nexecutable = /bin/sh\ntransfer_executable = true")
    assert "TransferExecutable" not in said  # what the submit file says wins
    assert "TransferExecutable" not in _ad("executable = /bin/sh")  # a vanilla job's travels


def test_by_default_a_container_job_s_absolute_executable_travels():
    from gridbus.submit import jobad

    jobad.never_transfer_absolute_container_cmd.cache_clear()
    assert "TransferExecutable" not in _ad("universe = docker\ndocker_image = busybox:1\nexecutable = /bin/sh")

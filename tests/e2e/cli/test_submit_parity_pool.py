"""Submit parity through a real pool: `gridbus submit` of corpus files, run in the submitter's own
directory, leaves in the schedd (a separate process, in another directory) the job ads HTCondor's
own submit code makes from the same text with the same cluster id.

The oracle is HTCondor 24's submit code (tests/unit/submit/oracle.py), given the cluster id the
schedd's NewCluster handed out. Compared: the attributes of the offline parity test (QDate and
JobSubmitMethod aside: the schedd stamps the first, and condor_submit's method is 0 where the Python
binding's is 2) and every custom attribute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gridbus.console import Schedd
from tests.unit.submit.oracle import ORACLE, oracle_python
from tests.unit.submit.test_parity import (
    COMPARED,
    CORPUS,
    PRESENCE_ONLY,
    WORKDIR,
    _canon,
    _custom_attrs,
    _text,
)

pytestmark = pytest.mark.e2e

GRIDBUS = Path(sys.executable).with_name("gridbus")
# The cases, and the ones that read the submitter's directory.
CASES = ["053_cluster_in_output.sub", "054_batch_name_cluster.sub", "055_initialdir_per_process.sub",
         "056_env_old_syntax_as_env.sub", "026_queue_matching.sub", "010_initialdir.sub", "041_max_idle.sub"]
SKIPPED = {"QDate", "EnteredCurrentStatus", "JobSubmitMethod"}


def _oracle(text: str, workdir: Path, cluster: int, scratch: Path) -> list[dict[str, str]]:
    corpus = scratch / f"oracle-{cluster}"
    corpus.mkdir()
    (corpus / "case.sub").write_text(text)
    done = subprocess.run(
        [str(oracle_python()), "-W", "ignore", str(ORACLE), str(corpus), str(workdir), str(cluster), "1700000000"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "CONDOR_CONFIG": "/dev/null", "TZ": "UTC"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)["case.sub"]
    assert "error" not in answer, answer
    return answer["jobs"]


def test_the_schedd_holds_what_htcondor_submit_makes(make_pool, tmp_path: Path):
    pool = make_pool()
    pool.start("schedd", "s")
    pool.wait_serving("schedd@s")
    submitter = tmp_path / "submitter"
    shutil.copytree(WORKDIR, submitter)
    schedd_dir = pool.workdir / "schedd-s"
    assert schedd_dir.resolve() != submitter.resolve()
    with Schedd(url=pool.url) as schedd:
        for name in CASES:
            text = (CORPUS / name).read_text()
            done = subprocess.run([str(GRIDBUS), "--pool", pool.url, "submit", str(CORPUS / name)],
                                  cwd=submitter, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{name}: {done.stderr}"
            cluster = int(re.search(r"submitted to cluster (\d+)", done.stdout).group(1))
            expected = _oracle(text, submitter, cluster, tmp_path)
            held = sorted(schedd.query(f"ClusterId == {cluster}"), key=lambda ad: ad["ProcId"])
            # A late-materialized cluster holds only its first procs; those must agree too.
            limit = int(expected[0].get("JobMaterializeMaxIdle", "0") or 0)
            assert len(held) == (min(limit, len(expected)) if limit else len(expected)), name
            attrs = [a for a in COMPARED + ["JobBatchName"] + _custom_attrs(text) if a not in SKIPPED]
            for index, (ours, theirs) in enumerate(zip(held, expected, strict=False)):
                for attr in attrs:
                    if attr not in theirs:
                        assert attr not in ours, f"{name} job {index}: the schedd holds {attr}, HTCondor makes none"
                        continue
                    assert attr in ours, f"{name} job {index}: HTCondor sets {attr} = {theirs[attr]}, the schedd has none"
                    if attr in PRESENCE_ONLY:
                        continue
                    assert _canon(_text(ours.lookup(attr) if hasattr(ours[attr], "eval") else ours[attr])) == \
                        _canon(theirs[attr]), f"{name} job {index}: {attr}"
            if "matching" in text or "initialdir" in text:
                assert all(str(submitter) in ad["Iwd"] for ad in held), name

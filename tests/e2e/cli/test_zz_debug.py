import subprocess, sys, time
from pathlib import Path
GRIDBUS = Path(sys.executable).with_name("gridbus")
def test_dbg(pool, tmp_path):
    (tmp_path / "true.sub").write_text("executable = /bin/true\nlog = true.log\nrequest_memory = 16MB\nqueue 3\n")
    print(subprocess.run([str(GRIDBUS), "--pool", pool.url, "submit", "true.sub"], cwd=tmp_path, capture_output=True, text=True))
    time.sleep(12)
    print(subprocess.run([str(GRIDBUS), "--pool", pool.url, "q", "-l"], cwd=tmp_path, capture_output=True, text=True).stdout[:3000])
    print(subprocess.run([str(GRIDBUS), "--pool", pool.url, "history", "-af", "ProcId", "JobStatus", "UserLog"], cwd=tmp_path, capture_output=True, text=True))
    print(list(tmp_path.iterdir()))
    p = tmp_path / "true.log"
    print(p.read_text() if p.exists() else "NO LOG")
    assert 0

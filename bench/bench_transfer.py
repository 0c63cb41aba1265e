"""File transfer over the bus: sandbox throughput beside the raw broker's, measured in the same run.

1. The raw broker (the peer): one connection publishes a payload in messages of the transfer's
   chunk size onto a queue while another consumes it (auto-ack), as fast as they go: MiB/s, for
   an exclusive classic queue (what a transfer uses) and a stream queue (``x-queue-type: stream``,
   durable, consumed with acks and a prefetch), and for the classic queue at several message sizes.
2. The chunk stream alone (gridbus/transfer/stream.py, send_files -> receive_files between two
   connections, files on disk, each file's digest on both ends): MiB/s at several chunk sizes.
3. A personal pool (collector, negotiator, schedd, one startd with 4 slots; real processes):
   1,000 jobs with 10 x 4 KiB inputs each (and one small output each) from a Submit to the last
   completion, beside the same 1,000 jobs without transfer and 1,000 with 1 x 4 KiB input, in the
   same run (jobs/s, the ratios, the owner's shadow's cpu per job), and one job with a 1 GiB input
   that it renames as its output (``--big-job cp``: copies; a copy is the job's own gigabyte of
   disk writes, counted in the wall time as if it were the transfer's): sandbox MiB/s (bytes in
   and out over the wall time, from the Submit to the completion), beside the raw broker's rate,
   and the ratio; the peak resident
   memory of the owner's shadow and the startd. ``--big-only``: that job alone, ``--rounds`` times,
   each between two runs of the raw broker (the machine's load drifts: each job's ratio is over the
   mean of the raw rates just before and after it), with a one-slot startd; each raw run is
   followed by one whose consumer writes every message to a new file on the job's disk (a second
   peer: the same bytes through the same broker, landing on disk as a transfer's do).

    .venv/bin/python bench/bench_transfer.py [--quick] [--small-only | --big-only [--rounds N]]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 1 << 20


def _vhost(tag: str) -> tuple[object, str, str]:
    from bench_pool import _vhost as make  # the pool benchmark's vhost helper

    return make(tag)


# ---------------------------------------------------------------------- 1. the raw broker
async def raw_rate(url: str, total: int, size: int, kind: str = "classic", into: Path | None = None) -> float:
    """MiB/s of ``total`` bytes in messages of ``size`` bytes, published and consumed at once.
    ``into``: the consumer writes each message to that file, made anew (the least any transfer that
    ends on disk does: no hash, no thread, no flow control), and it is removed after."""
    import aio_pika

    pub_conn, sub_conn = await aio_pika.connect(url), await aio_pika.connect(url)
    try:
        sub = await sub_conn.channel()
        if kind == "stream":
            await sub.set_qos(prefetch_count=64)
            queue = await sub.declare_queue(f"bench-stream-{uuid.uuid4().hex[:8]}", durable=True,
                                            arguments={"x-queue-type": "stream"})
        else:
            queue = await sub.declare_queue("", exclusive=True, auto_delete=True)
        count = max(1, total // size)
        done = asyncio.get_running_loop().create_future()
        got = 0
        fd = os.open(into, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if into else -1

        async def on_message(message):
            nonlocal got
            got += 1
            if fd >= 0:
                os.write(fd, message.body)
            if kind == "stream":
                await message.ack()
            if got == count and not done.done():
                done.set_result(None)

        tag = await queue.consume(on_message, no_ack=kind != "stream",
                                  arguments={"x-stream-offset": "next"} if kind == "stream" else None)
        pub = await pub_conn.channel(publisher_confirms=False)
        body = os.urandom(size)
        started = time.monotonic()
        for _ in range(count):
            await pub.default_exchange.publish(aio_pika.Message(body), routing_key=queue.name)
        await asyncio.wait_for(done, 600)
        if fd >= 0:
            os.close(fd)
        rate = count * size / MIB / (time.monotonic() - started)
        if kind == "stream":
            await queue.cancel(tag)
            await queue.delete(if_unused=False, if_empty=False)
        return rate
    finally:
        await pub_conn.close()
        await sub_conn.close()
        if into:
            into.unlink(missing_ok=True)


# ---------------------------------------------------------------------- 2. the chunk stream
async def stream_rate(url: str, path: Path, chunk: int, window: int) -> float:
    import aio_pika

    from gridbus.transfer import stream

    out = path.parent / f"out-{chunk}"
    out.mkdir(exist_ok=True)
    a, b = await aio_pika.connect(url), await aio_pika.connect(url)
    try:
        sender, receiver = stream.Endpoint(a, "bench"), stream.Endpoint(b, "bench")
        await sender.open()
        await receiver.open()
        sender.peer = receiver.queue_name
        sender.heard(stream.OPENING)  # (as the receiver's opening message would tell it)
        started = time.monotonic()
        await asyncio.gather(
            stream.send_files(sender, [stream.Entry("f", str(path))], chunk_size=chunk, window=window),
            stream.receive_files(receiver, stream.DirectorySink(lambda n: str(out / n)), window=window))
        rate = path.stat().st_size / MIB / (time.monotonic() - started)
    finally:
        await a.close()
        await b.close()
        shutil.rmtree(out, ignore_errors=True)
    return rate


def _write_random(path: Path, mib: int) -> None:
    block = os.urandom(MIB)
    with open(path, "wb") as fh:
        for i in range(mib):
            fh.write(block[:-8] + i.to_bytes(8, "big"))


# ---------------------------------------------------------------------- 3. the pool
def _peak_rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _shadows(schedd_pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == schedd_pid:
                out.append(int(entry))
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class _ShadowCpu:
    """The owners' shadows' cpu seconds over a batch: sampled while it runs (a shadow may be
    stopped, or started, between batches), each pid counted from its first sample or from 0."""

    def __init__(self, schedd_pid: int):
        self.schedd_pid = schedd_pid
        self.first: dict[int, float] = {p: _cpu_seconds(p) for p in _shadows(schedd_pid)}
        self.last: dict[int, float] = dict(self.first)

    def sample(self) -> None:
        for p in _shadows(self.schedd_pid):
            self.last[p] = _cpu_seconds(p)

    def used(self) -> float:
        self.sample()
        return sum(v - self.first.get(p, 0.0) for p, v in self.last.items())


def start_pool(pool, slots: int) -> None:
    """The bench's personal pool: collector, negotiator, schedd and one startd of ``slots`` slots."""
    pool.start("collector", "c")
    pool.start("negotiator", "n")
    pool.start("schedd", "s")
    pool.start("startd", "a", GRIDBUS_NUM_SLOTS=str(slots), GRIDBUS_NUM_CPUS=str(slots), GRIDBUS_MEMORY="4096")
    pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
    pool.wait_slots(slots)


def _batch(pool, jobs: int, submit: Path, script: Path, **attrs: str) -> dict[str, float]:
    """``jobs`` jobs of ``script`` from one Submit to the last completion: jobs/s, bytes moved,
    the shadows' cpu per job."""
    from tests.e2e.pool import wait_for

    cpu = _ShadowCpu(pool.procs["schedd@s"].pid)
    daemons = {name: pool.procs[f"{name}@{host}"].pid for name, host in (("schedd", "s"), ("startd", "a"))}
    daemons_before = {name: _cpu_seconds(pid) for name, pid in daemons.items()}
    started = time.monotonic()
    cluster = pool.submit("schedd@s", jobs, cmd=str(script), Iwd=str(submit), Out="/dev/null", Err="/dev/null",
                          **attrs)

    def left() -> bool:  # none idle or running (a held job is counted apart)
        cpu.sample()
        return not pool.jobs("schedd@s", f"ClusterId == {cluster} && JobStatus <= 2", ["ProcId"])

    wait_for(f"{jobs} jobs", left, 1800, interval=0.25)
    wall = time.monotonic() - started
    done = pool.history("schedd@s", f"ClusterId == {cluster}", ["BytesSent", "BytesRecvd", "JobStatus"])
    moved = sum(int(j.get("BytesSent", 0)) + int(j.get("BytesRecvd", 0)) for j in done)
    return {"jobs": len(done), "completed": sum(1 for j in done if j.get("JobStatus") == 4),
            "held": len(pool.jobs("schedd@s", f"ClusterId == {cluster} && JobStatus == 5", ["ProcId"])),
            "jobs_per_s": len(done) / wall, "MiB_per_s": moved / MIB / wall, "bytes_per_job": moved / max(1, len(done)),
            "shadow_cpu_ms_per_job": 1000 * cpu.used() / max(1, len(done)),
            # (where a transfer's cost lands beside the bare jobs': the daemons' own cpu per job)
            **{f"{name}_cpu_ms_per_job": 1000 * (_cpu_seconds(pid) - daemons_before[name]) / max(1, len(done))
               for name, pid in daemons.items()}}


def pool_rates(url: str, work: Path, jobs: int, big_mib: int, small_only: bool = False) -> dict[str, float]:
    from tests.e2e.pool import Pool

    submit = work / "submit"
    inputs = submit / "inputs"
    inputs.mkdir(parents=True)
    for i in range(10):
        (inputs / f"in{i}.dat").write_bytes(os.urandom(4096))
    script = submit / "job.sh"  # the same job with and without transfer: it reads in*.dat where it runs
    script.write_text("#!/bin/sh\ncat in*.dat inputs/in*.dat 2>/dev/null | wc -c > out.txt\n")
    os.chmod(script, 0o755)
    pool = Pool(url, work / "pool")
    out: dict[str, float] = {}
    try:
        start_pool(pool, 4)
        # Side by side in one run: the bare jobs (no transfer: they read the inputs in the submit
        # directory), the same with 10 x 4 KiB inputs and 1 output transferred, and with 1 x 4 KiB.
        # The bare jobs run first and last (the machine is shared: its load drifts), after a few
        # jobs that warm the pool up (claims, the shadow); the ratios are over their mean rate.
        ten = ", ".join(f"inputs/in{i}.dat" for i in range(10))
        bare = {"ShouldTransferFiles": "NO"}
        _batch(pool, 20, submit, script, **bare)
        runs = {"bare": bare,
                "small": {"ShouldTransferFiles": "YES", "TransferInput": ten, "TransferOutput": "out.txt"},
                "one": {"ShouldTransferFiles": "YES", "TransferInput": "inputs/in0.dat", "TransferOutput": "out.txt"},
                "bare_again": bare}
        for name, attrs in runs.items():
            for key, value in _batch(pool, jobs, submit, script, **attrs).items():
                out[f"{name}_{key}"] = value
        bare_rate = (out["bare_jobs_per_s"] + out["bare_again_jobs_per_s"]) / 2
        out["ratio_small_over_bare"] = out["small_jobs_per_s"] / bare_rate
        out["ratio_one_over_bare"] = out["one_jobs_per_s"] / bare_rate
        out["small_files_per_s"] = out["small_jobs_per_s"] * 12  # 10 inputs + the executable in, 1 output back
        out["small_sandbox_MiB_per_s"] = out["small_MiB_per_s"]
        if small_only:
            return out

        out.update(big_job(pool, submit, big_mib))
    finally:
        pool.stop()
    return out


def big_job(pool, submit: Path, big_mib: int, command: str = "mv") -> dict[str, float]:
    """One job with a ``big_mib`` MiB input that ``command`` (mv or cp) makes its output: the sandbox's MiB/s (bytes
    in and out over the wall time from the Submit to the job's completion), each direction's span
    and the peak RSS of the owner's shadow and the startd."""
    from tests.e2e.pool import wait_for

    out: dict[str, float] = {}
    shadow_rss = [0.0]
    shadows: list[int] = []
    scanned = [0.0]

    def left() -> bool:
        # Asked often (the completion's moment is the measurement's end), but /proc is scanned for
        # the shadows at most twice a second (a scan is cpu taken from the pool it measures); the
        # shadow's peak (VmHWM) is read while it lives (the schedd stops it once idle).
        if time.monotonic() - scanned[0] > 0.5:
            shadows[:] = _shadows(pool.procs["schedd@s"].pid)
            scanned[0] = time.monotonic()
        shadow_rss.append(max([_peak_rss_mib(p) for p in shadows] or [0.0]))
        return not pool.jobs("schedd@s", "JobStatus <= 2", ["ProcId"])

    big = submit / "big.bin"
    if not big.exists():
        _write_random(big, big_mib)
    copy = submit / "copy.bin"
    copy.unlink(missing_ok=True)
    copy_script = submit / "copy.sh"
    copy_script.write_text(f"#!/bin/sh\n{command} big.bin copy.bin\n")
    os.chmod(copy_script, 0o755)
    started = time.monotonic()
    cluster = pool.submit("schedd@s", 1, cmd=str(copy_script), Iwd=str(submit), ShouldTransferFiles="YES",
                          TransferInput="big.bin", TransferOutput="copy.bin", Out="/dev/null", Err="/dev/null")
    wait_for("the big-file job", left, 1800, interval=0.05)
    wall = time.monotonic() - started
    (job,) = pool.history("schedd@s", f"ClusterId == {cluster}", [
        "BytesSent", "BytesRecvd", "JobStatus", "TransferInStarted", "TransferInFinished", "TransferOutStarted",
        "TransferOutFinished"])
    out["big_MiB"] = big_mib
    out["big_job_wall_s"] = wall
    out["big_in_and_out_MiB_per_s"] = 2 * big_mib / wall
    span = max(1, int(job.get("TransferInFinished", 0)) - int(job.get("TransferInStarted", 0)))
    out["big_input_MiB_per_s_approx"] = big_mib / span  # whole seconds only
    span = max(1, int(job.get("TransferOutFinished", 0)) - int(job.get("TransferOutStarted", 0)))
    out["big_output_MiB_per_s_approx"] = big_mib / span
    out["big_copy_intact"] = float(_digest(copy) == _digest(big))
    left()
    out["shadow_peak_rss_MiB"] = max(shadow_rss)
    out["startd_peak_rss_MiB"] = _peak_rss_mib(pool.procs["startd@a"].pid)
    out["schedd_peak_rss_MiB"] = _peak_rss_mib(pool.procs["schedd@s"].pid)
    return out


def big_only(url: str, work: Path, big_mib: int, rounds: int, command: str = "mv") -> dict[str, object]:
    """The 1 GiB part alone, the raw broker and the pool's job alternately (raw, job, raw, job, ...,
    raw: the machine is shared and its load drifts): each job's rate over the mean of the raw
    rates measured just before and after it; the figures of each round and their medians.

    Beside each raw run, a second peer: the raw broker whose consumer writes what it gets to a new
    file on the disk of the job's sandbox and submit directory. A job's bytes land on disk at both
    ends; the raw broker's never do, and on some machines (a virtual machine whose host takes back
    the guest's free memory) a page cache page first written costs as much as the broker's path."""
    from gridbus.transfer import stream
    from tests.e2e.pool import Pool

    submit = work / "submit"
    submit.mkdir(parents=True)
    pool = Pool(url, work / "pool")
    figures: dict[str, object] = {}
    raws: list[float] = []
    to_disk: list[float] = []

    def peers() -> None:
        raws.append(asyncio.run(raw_rate(url, 512 * MIB, stream.CHUNK_SIZE)))
        to_disk.append(asyncio.run(raw_rate(url, 512 * MIB, stream.CHUNK_SIZE, into=submit / "raw.bin")))

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    try:
        start_pool(pool, 1)
        peers()
        ratios, disk_ratios, jobs = [], [], []
        for _ in range(rounds):
            job = big_job(pool, submit, big_mib, command)
            peers()
            jobs.append(job)
            ratios.append(job["big_in_and_out_MiB_per_s"] / ((raws[-2] + raws[-1]) / 2))
            disk_ratios.append(job["big_in_and_out_MiB_per_s"] / ((to_disk[-2] + to_disk[-1]) / 2))
        figures["raw_classic_MiB_per_s"] = [round(r, 1) for r in raws]
        figures["raw_into_a_new_file_MiB_per_s"] = [round(r, 1) for r in to_disk]
        figures["big_in_and_out_MiB_per_s"] = [round(j["big_in_and_out_MiB_per_s"], 1) for j in jobs]
        figures["big_input_MiB_per_s_approx"] = [round(j["big_input_MiB_per_s_approx"], 1) for j in jobs]
        figures["big_output_MiB_per_s_approx"] = [round(j["big_output_MiB_per_s_approx"], 1) for j in jobs]
        figures["ratio_big_over_raw"] = [round(r, 2) for r in ratios]
        figures["ratio_big_over_raw_median"] = round(median(ratios), 2)
        figures["ratio_big_over_raw_into_a_file"] = [round(r, 2) for r in disk_ratios]
        figures["ratio_big_over_raw_into_a_file_median"] = round(median(disk_ratios), 2)
        figures["big_copy_intact"] = all(j["big_copy_intact"] == 1.0 for j in jobs)
        for key in ("shadow_peak_rss_MiB", "startd_peak_rss_MiB", "schedd_peak_rss_MiB"):
            figures[key] = round(max(j[key] for j in jobs), 1)
        figures["chunk_KiB"], figures["window"] = stream.CHUNK_SIZE // 1024, stream.WINDOW
        figures["big_job"] = command
    finally:
        pool.stop()
    return figures


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(MIB):
            h.update(block)
    return h.hexdigest()


def run(quick: bool = False, small_only: bool = False, big: bool = False, rounds: int = 3, big_job_command: str = "mv") -> dict:
    from gridbus import allocator
    from gridbus.transfer import stream

    # Equal settings: the raw peer's ends (in this process) get the malloc tuning that gridbus's
    # daemons and owners' shadows run with (gridbus/allocator.py).
    allocator.tune()
    mgmt, vhost, url = _vhost("transfer")
    work = Path(tempfile.mkdtemp(prefix="gridbus-bench-transfer-"))
    figures: dict[str, object] = {}
    try:
        if big:
            return big_only(url, work, 128 if quick else 1024, rounds, big_job_command)
        if small_only:
            figures.update(pool_rates(url, work, 100 if quick else 1000, 0, small_only=True))
            return figures
        raw_total = (128 if quick else 512) * MIB
        figures["raw_classic_MiB_per_s"] = asyncio.run(raw_rate(url, raw_total, stream.CHUNK_SIZE))
        figures["raw_stream_queue_MiB_per_s"] = asyncio.run(raw_rate(url, raw_total, stream.CHUNK_SIZE, "stream"))
        figures["raw_classic_by_message_KiB"] = {
            size // 1024: round(asyncio.run(raw_rate(url, raw_total // 2, size)), 1)
            for size in (64 * 1024, 256 * 1024, MIB, 4 * MIB, 16 * MIB)}
        sample = work / "sample.bin"
        _write_random(sample, 64 if quick else 256)
        figures["stream_by_chunk_KiB"] = {
            chunk // 1024: round(asyncio.run(stream_rate(url, sample, chunk, stream.WINDOW)), 1)
            for chunk in (64 * 1024, 256 * 1024, MIB, 4 * MIB)}
        sample.unlink()
        pool = pool_rates(url, work, 100 if quick else 1000, 128 if quick else 1024)
        figures.update(pool)
        raw = float(figures["raw_classic_MiB_per_s"])  # type: ignore[arg-type]
        figures["ratio_big_over_raw"] = pool["big_in_and_out_MiB_per_s"] / raw
        figures["ratio_small_over_raw"] = pool["small_sandbox_MiB_per_s"] / raw
        figures["chunk_KiB"], figures["window"] = stream.CHUNK_SIZE // 1024, stream.WINDOW
    finally:
        shutil.rmtree(work, ignore_errors=True)
        mgmt.delete_vhost(vhost)  # type: ignore[attr-defined]
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (a smoke run)")
    parser.add_argument("--small-only", action="store_true",
                        help="only the small-sandbox jobs beside the same jobs without transfer (no raw broker, no 1 GiB)")
    parser.add_argument("--big-only", action="store_true",
                        help="only the 1 GiB job and the raw broker, alternately, in --rounds rounds (no small jobs)")
    parser.add_argument("--rounds", type=int, default=3, help="--big-only: jobs, each between two raw runs")
    parser.add_argument("--big-job", choices=("mv", "cp"), default="mv",
                        help="--big-only: the 1 GiB job renames its input as its output (mv) or copies it (cp)")
    args = parser.parse_args()
    result = run(quick=args.quick, small_only=args.small_only, big=args.big_only, rounds=max(1, args.rounds),
                 big_job_command=args.big_job)
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")

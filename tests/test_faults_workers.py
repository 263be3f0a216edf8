"""Fault injection, worker processes: a parse worker killed with SIGKILL (what the out-of-memory killer does), the
driver killed while its workers run, and a lock whose recorded writer is gone. Real `synprep convert` processes
and real signals; every wait is bounded, so a hang fails the test instead of stopping the suite.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .test_convert import _bigger_corpus, write_pipeline

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the workers through /proc (Linux)")


def children(pid: int) -> list[int]:
    """The forked children of `pid` (same command line: the pool's workers), oldest first."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == pid and Path(f"/proc/{name}/cmdline").read_bytes() == cmdline:
                found.append((int(stat[19]), int(name)))
        except (OSError, IndexError, ValueError):
            continue
    return [child for _, child in sorted(found)]


def start_convert(tmp_path: Path, tiny_udpipe, count: int) -> tuple[subprocess.Popen, list[int], Path]:
    """`synprep convert --workers 2` on a corpus that takes seconds to parse, once `count` workers run (the
    filter pool's 2, then the parse pool's 2)."""
    # --no-dedupe: the 40 copies would otherwise be parsed once, and the run could end before the signal lands
    pipeline = write_pipeline(tmp_path, tiny_udpipe, train=_bigger_corpus(tmp_path, copies=40), shard_size=200)
    process = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--workers", "2", "--no-dedupe"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 60
    while len(workers := children(process.pid)) < count and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    if len(workers) < count:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"no {count} workers seen: {process.communicate()[1][-800:]}")
    return process, workers, pipeline


def finish(process: subprocess.Popen, timeout: float = 60) -> str:
    """stderr of a process that must end by itself (a hang fails the test, and the group is killed)."""
    try:
        return process.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("convert hangs after its worker was killed")


def gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not any(os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_worker_killed_by_sigkill_ends_convert_in_one_line_naming_the_signal_and_resume(tmp_path, tiny_udpipe):
    """Before: the pool replaced the dead worker and the driver waited for its lost task for ever."""
    process, workers, pipeline = start_convert(tmp_path, tiny_udpipe, 4)
    os.kill(workers[-1], signal.SIGKILL)  # the newest: a parse worker, with a task in flight
    stderr = finish(process)
    assert process.returncode == 2, stderr[-1500:]
    assert "Traceback" not in stderr, stderr[-1500:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("synprep: error: a worker process was killed by SIGKILL"), last
    assert last.endswith(f"continue with synprep convert {pipeline} --workers 2 --no-dedupe --resume"), last
    assert gone(workers), "workers left running"
    work = tmp_path / "out" / ".work"
    assert (work / "config.json").is_file(), "the work folder --resume needs is gone"


def test_workers_die_with_a_killed_driver_and_leave_the_lock_free(tmp_path, tiny_udpipe):
    """Kill a worker, then the driver (the out-of-memory killer's order). Before: the pool had replaced the
    worker, and the workers outlived the driver and held OUT/.lock for ever (a --resume was refused)."""
    process, workers, _ = start_convert(tmp_path, tiny_udpipe, 4)
    os.kill(workers[0], signal.SIGKILL)
    time.sleep(0.3)  # a replacement, if any, is started
    workers = sorted(set(workers) | set(children(process.pid)))
    os.kill(process.pid, signal.SIGKILL)  # the driver only: its workers are told by the kernel
    process.communicate(timeout=30)
    try:
        assert gone(workers, 20), f"orphaned workers still run: {[(p, _state(p)) for p in workers]}"
    finally:
        for pid in workers:
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
    with open(tmp_path / "out" / ".lock", "rb+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            from synprep.processes import holders

            pytest.fail(f"the lock is still held, by {holders(str(tmp_path / 'out' / '.lock'))}")


def test_a_lock_whose_recorded_writer_is_gone_names_the_process_that_holds_it(tmp_path, tiny_udpipe):
    """The recorded pid is this test's, with another start time (a reused pid): the refusal names the process
    really holding the lock, not the recorded one."""
    pipeline = write_pipeline(tmp_path, tiny_udpipe)
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, sys, time
fd = os.open({str(out / '.lock')!r}, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"pid {os.getpid()} on {os.uname().nodename}, since 2020-01-01 00:00:00\\nstart 1\\n")
print("locked", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        refused = subprocess.run([str(BIN / "synprep"), "convert", str(pipeline)], capture_output=True, text=True,
                                 timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert f"pid {os.getpid()} on" in last and f"is gone: the lock is held by pid {holder.pid}" in last, last


LINGERING = '''import pathlib, threading, time


def answer_then_finish(folder):
    """Answers at once; the process ends only after a thread of its own has written `finished`."""
    def finish():
        time.sleep(0.5)
        pathlib.Path(folder, "finished").write_text("yes")
    threading.Thread(target=finish).start()
    return 42
'''


def test_a_process_that_answered_is_left_to_end_by_itself(tmp_path, monkeypatch):
    """`apart` stops its process only when it gets no answer (Ctrl-C): a process that answered and is still
    ending is not sent SIGTERM (a signal in its interpreter's shutdown printed a traceback under load)."""
    from synprep.convert.bpe_codes import apart

    (tmp_path / "lingering.py").write_text(LINGERING)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned process imports the function from there
    from lingering import answer_then_finish

    assert apart(answer_then_finish, str(tmp_path)) == 42
    assert (tmp_path / "finished").read_text() == "yes"  # it ran to its end, and apart waited for it


def _ray_convert(tmp_path: Path, seconds: str | None) -> subprocess.Popen:
    """`convert --engine ray --ray-address 127.0.0.1:1` (nothing listens there) on a small synthetic corpus."""
    pytest.importorskip("ray")
    subprocess.run([str(BIN / "synprep"), "synth", "--pairs", "100", "-o", str(tmp_path / "syn")], check=True,
                   capture_output=True)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": str(tmp_path)}
    if seconds is not None:
        env["SYNPREP_RAY_CONNECT_SECONDS"] = seconds
    return subprocess.Popen([str(BIN / "synprep"), "convert", str(tmp_path / "syn" / "pipeline.toml"), "--output",
                             str(tmp_path / "out"), "--engine", "ray", "--ray-address", "127.0.0.1:1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def test_an_unreachable_ray_address_ends_in_one_line_within_the_bound(tmp_path):
    """Before: Ray retried for ever, printing only its retry lines."""
    started = time.monotonic()
    process = _ray_convert(tmp_path, "3")
    stderr = finish(process, 90)
    assert time.monotonic() - started < 60, "the connect step was not bounded"
    assert process.returncode == 2 and "Traceback" not in stderr, stderr[-1500:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "--ray-address 127.0.0.1:1: no Ray head answers there" in lines[0], stderr[-1500:]
    assert not (tmp_path / "out").exists()


def test_sigterm_while_connecting_to_ray_ends_at_once(tmp_path):
    """Before: SIGTERM was ignored for about 45 s while Ray retried."""
    process = _ray_convert(tmp_path, None)  # the documented 30 s bound
    time.sleep(5)  # connecting by now (the corpus is made before the convert starts)
    assert process.poll() is None, process.communicate()[1][-1500:]
    signalled = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    stderr = finish(process, 60)
    assert time.monotonic() - signalled < 10, "SIGTERM did not end the connect step at once"
    assert process.returncode == 143 and "Traceback" not in stderr, stderr[-1500:]
    assert stderr.strip().splitlines()[-1].startswith("synprep: stopped by SIGTERM"), stderr[-1500:]


STOPPED_CONSUMER = '''
import contextlib
import sys
import tempfile
from synprep.convert.converter import _make_mapper

def big(state, n):
    return b"x" * (4 << 20)  # larger than a pipe: a worker is nearly always part-way through sending one

def setup():
    return None

mapper = _make_mapper(sys.argv[2], 2, None)  # the engine's map, as convert makes it
with contextlib.closing(mapper(big, range(200), setup, ())) as results:  # as the commands close their maps
    for i, _ in enumerate(results):
        if i == 3:
            if sys.argv[1] == "error":
                raise ValueError("the consumer failed")
            if sys.argv[1] == "interrupt":
                raise KeyboardInterrupt
            break  # "close": a consumer that stopped early
'''


@pytest.mark.parametrize("engine", ["local", "ray"])
@pytest.mark.parametrize("how", ["error", "interrupt", "close"])
def test_a_consumer_that_stops_while_workers_send_results_ends_without_a_hang(tmp_path, how, engine):
    """Every command that maps over worker processes (convert, align, filter, validate, parse) stops them when it
    fails: the workers were killed part-way through sending a result, and the pool's manager thread waited for the
    rest of that message forever, so a convert stopped by a full disk printed its line and never exited (1 run in
    5 on a loaded machine). A bounded wait: a hang fails the test. Each convert engine's map (Ray: its actors
    killed, the local instance shut down at exit)."""
    script = tmp_path / "consumer.py"
    script.write_text(STOPPED_CONSUMER)
    if engine == "ray":
        pytest.importorskip("ray")
    ray_temp = tempfile.mkdtemp(prefix="sr")  # Ray's socket paths must stay under 108 bytes
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "RAY_AUTH_MODE": "disabled",
                   "SYNPREP_RAY_TMP": ray_temp}
    for _ in range(5 if engine == "local" else 1):  # the race needs a worker mid-message: with 4 MB results, nearly
        done = subprocess.run([sys.executable, str(script), how, engine], capture_output=True, text=True,  # every run
                              timeout=90, env=environment)
        expected = {"error": 1, "interrupt": -signal.SIGINT if engine == "local" else 1, "close": 0}[how]
        assert done.returncode == expected, done.stderr[-2000:]
    shutil.rmtree(ray_temp, ignore_errors=True)

"""scripts/ci_cpu_usage.py: the whole machine's CPU over a CI run, recorded from /proc/stat and summed up for the end
of CI's log, so a slow run says whether its lanes waited on the CPU."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.script_module import load_file

cpu = load_file("scripts/ci_cpu_usage.py", "ci_cpu_usage")

STAT = """cpu  100 5 50 800 40 3 2 0 7 0
cpu0 50 2 25 400 20 1 1 0 3 0
intr 12345
"""


def line(seconds, user, nice, system, idle, iowait, steal=0):
    return "%.1f %d %d %d %d %d 0 0 %d\n" % (seconds, user, nice, system, idle, iowait, steal)


def test_the_aggregate_line_is_read_not_a_cores():
    assert cpu.parse_stat(STAT) == {"user": 100, "nice": 5, "system": 50, "idle": 800, "iowait": 40, "irq": 3,
                                    "softirq": 2, "steal": 0}
    with pytest.raises(ValueError):
        cpu.parse_stat("cpu0 1 2 3 4\n")


def test_busy_is_what_was_neither_idle_nor_waiting_on_io(tmp_path):
    record = tmp_path / "cpu.txt"
    # 0-300 s: 900 of 1000 ticks busy; 300-400 s: idle but for 100 iowait of 400; a line cut short at the end.
    record.write_text(line(0, 0, 0, 0, 0, 0) + line(300, 700, 100, 100, 100, 0) + line(400, 700, 100, 100, 400, 100)
                      + "401.0 7")
    text = cpu.summary(str(record), cores=2)
    assert "over 400 s: 64% busy (user 50, nice 7, system 7; iowait 7, steal 0)" in text
    assert text.endswith("busy by 5 minutes: 90 0")


def test_a_missing_or_single_sample_record_is_named_not_fatal(tmp_path):
    assert "no CPU record" in cpu.summary(str(tmp_path / "none.txt"))
    one = tmp_path / "one.txt"
    one.write_text(line(0, 1, 1, 1, 1, 1))
    assert "fewer than two samples" in cpu.summary(str(one))


def test_record_samples_until_stopped_and_writes_a_last_sample(tmp_path):
    record = tmp_path / "cpu.txt"
    recorder = subprocess.Popen([sys.executable, "scripts/ci_cpu_usage.py", "record", str(record), "--every", "0.2"],
                                cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        for _ in range(100):  # a safety bound, not a measurement
            if record.exists() and len(cpu.read_samples(str(record))) >= 3:
                break
            time.sleep(0.1)
    finally:
        recorder.send_signal(signal.SIGTERM)
        assert recorder.wait(timeout=30) == 0
    samples = cpu.read_samples(str(record))
    assert len(samples) >= 3
    assert [seconds for seconds, _ in samples] == sorted(seconds for seconds, _ in samples)
    assert all(later[1]["idle"] >= earlier[1]["idle"] for earlier, later in zip(samples, samples[1:]))

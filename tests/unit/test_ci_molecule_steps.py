"""scripts/ci-molecule-steps.py: a stage line per molecule step, and the slowest plays of the run."""
import io
import sys
from tests.helpers.script_module import load_file

steps = load_file("scripts/ci-molecule-steps.py", "ci_molecule_steps")

# molecule's own framing and colours, as it prints them; line k is read at 10 k seconds.
OUTPUT = (
    "INFO     default \u279c converge: Executing\n"
    "  \x1b[2m\u2502\x1b[0m PLAY [Prepare SM120 hosts (preflight, locked install, fusion patch, NCCL\n"
    "  \u2502   settings)] ***\n"
    "  \u2502 TASK [x]\n"
    "  \u2502 PLAY RECAP\n"
    "  \u2502 PLAY [Restart the servers]\n"
    "INFO     default \u279c converge: Executed: Successful\n"
    "INFO     default \u279c verify: Executing\n"
    "  \u2502 PLAY [Check]\n"
    "INFO     default \u279c verify: Executed: Failed\n"
)


class Clock(object):
    now = 0


def lines_read(clock):
    for line in OUTPUT.splitlines(True):
        clock.now += 10
        yield line.encode("utf-8")


class FakeStdin(object):
    def __init__(self, clock):
        self.buffer = lines_read(clock)


def test_stage_lines_and_the_slowest_plays(tmp_path, monkeypatch, capsys):
    clock = Clock()
    monkeypatch.setattr(steps.time, "monotonic", lambda: clock.now)
    monkeypatch.setenv("CI_LOGS", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", FakeStdin(clock))
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="utf-8", write_through=True))
    steps.main("molecule-default")
    text = out.getvalue().decode("utf-8")
    stages = (tmp_path / "stages.txt").read_text()
    assert stages == ("== ci: stage molecule-default/converge 60 s\n"
                      "== ci: stage molecule-default/verify 20 s FAILED\n")
    slowest = text.split("== ci: slowest plays of molecule-default (wall s, step, play):\n")[1].splitlines()
    assert [line.split(None, 2) for line in slowest[1:]] == [["10", "verify", "Check"],
                                                             ["10", "converge", "Restart the servers"]]
    assert slowest[0].split(None, 2)[:2] == ["40", "converge"]
    assert slowest[0].endswith("Prepare SM120 hosts (preflight, locked install, fusion patch, NCCL")
    assert "PLAY [Check]" in text  # molecule's output passes through whole

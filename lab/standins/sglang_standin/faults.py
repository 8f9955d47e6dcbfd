"""Injected faults (config keys error_pct, crash_after_s, exit_on_start; a refused fusion backend ends the same
way): each fails as the real server fails, with SGLang's own log lines and exit codes."""
import math
import signal
import time

from sglang_standin.logs import die, log, tp_prefix


def fails_at(call, error_pct):
    """True for error_pct % of /generate calls, spread evenly: call k fails when floor(k*pct/100) steps up."""
    pct = float(error_pct)
    return pct > 0 and math.floor(call * pct / 100.0 + 1e-9) > math.floor((call - 1) * pct / 100.0 + 1e-9)


def scheduler_crash(server, rank, exc_type, message, frames):
    """scheduler.py run_scheduler_process: 'Scheduler hit an exception: <traceback>', then SIGQUIT to the parent."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append('  File "%s", line %d, in %s' % (path, line, func))
        lines.append("    " + code)
    lines.append("%s: %s" % (exc_type, message))
    log("Scheduler hit an exception: " + "\n".join(lines) + "\n", tp_prefix(server, rank))
    if server.ready:  # the tokenizer manager's running-phase handler
        log("SIGQUIT received. signum=%d, frame=None. It usually means one child failed." % signal.SIGQUIT)
    else:  # engine.py's launch-phase handler
        log("Received sigquit from a child process. It usually means the child failed.")


def crash_while_loading(server, rank, code):
    """exit_on_start: a scheduler dies right after `Load weight begin` with this exit code."""
    scheduler_crash(server, rank, "RuntimeError",
                    "sglang STAND-IN: exit_on_start=%d (simulated failure while loading the model)" % code,
                    [("sglang/srt/model_executor/model_runner.py", 1190, "load_model",
                      "self.model = self.loader.load_model(...)")])
    die(code)


def crash_later(server, after):
    time.sleep(after)
    scheduler_crash(server, 0, "RuntimeError",
                    "sglang STAND-IN: crash_after_s=%s (simulated crash of a scheduler process)" % (after,),
                    [("sglang/srt/managers/scheduler.py", 6088, "run_scheduler_process",
                      "scheduler.run_event_loop()")])
    die(1)

#!/usr/bin/env python3
"""SGLang server STAND-IN for tests and the container lab: NOT SGLang, it loads no model and runs no kernel.

It is started the way a systemd unit starts the real server, with the real flags:

    ExecStart=<venv>/bin/python <path>/sglang_server_standin.py --model-path ... --tp-size 8 ...

and answers SGLang 0.5.21's HTTP API with the real paths and JSON shapes, prints SGLang's real start-up log lines
and makes up completions at a configured rate. Its parts, one concern each, are the package beside it
(sglang_standin/: flags, start-up log, HTTP API, speculation and logprobs, injected faults); this file only
starts it. Behaviour: $SGLANG_STANDIN_CONFIG (default /etc/sglang-standin/config.json); see
lab/standins/README.md. Python 3 standard library only. Production never installs it.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the package beside this file, even under `python -I` (no script directory on the path)
    sys.path.insert(0, HERE)

from sglang_standin.lifecycle import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

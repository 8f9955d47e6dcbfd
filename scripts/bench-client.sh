#!/usr/bin/env bash
# The SGLang benchmark client venv for the lab and the tests (.cache/sglang-bench-client), from the exact pins in
# lab/bench-client/requirements.txt, --no-deps; idempotent (a stamp of the lock). About 6 GB: SGLang's client
# imports torch. The lab's benchmark play installs the same lock the same way (role sglang_benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SGLANG_BENCH_CLIENT_VENV:-.cache/sglang-bench-client}
lock=lab/bench-client/requirements.txt
stamp="$venv/.lock.sha256"
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python3 -m venv "$venv"
  # --no-compile: Python compiles what the client imports when it first imports it, not all of torch up front.
  "$venv/bin/python" -m pip install -q --no-deps --no-compile -r "$lock"
  echo "$want" > "$stamp"
fi
# The client's import closure compiled once, here: where PYTHONDONTWRITEBYTECODE is set (as on CI's machine) Python
# never writes what it compiles, and every start of the client (each benchmark run, each warm client, the tests')
# would compile torch, transformers and sglang from source again, some 10 s of CPU each time.
compiled="$venv/.bytecode.sha256"
if [ "$(cat "$compiled" 2>/dev/null)" != "$want" ]; then
  if env -u PYTHONDONTWRITEBYTECODE "$venv/bin/python" -c 'import sglang.benchmark.serving' > /dev/null 2>&1; then
    echo "$want" > "$compiled"
  else
    echo "bench client: importing sglang.benchmark.serving failed; its imports are compiled at each start" >&2
  fi
fi
echo "bench client: $venv ($("$venv/bin/python" -c 'import importlib.metadata as m; print("sglang", m.version("sglang"))'))"

#!/usr/bin/env python3
"""A STAND-IN for ssh, for the peer model source's tests (no sshd runs here): takes ssh's command line as rsync
gives it (options, the host, the remote command), checks nothing about the host, and runs the remote command on this
machine with sh -c, as sshd runs it with the user's shell. So the real rsync on both ends talks its real protocol
through this process's stdin and stdout; only the network and the authentication are missing.

Environment (set with /usr/bin/env in the rsh command):
  SSH_STANDIN_LOG=FILE        append this process's argv as one JSON line
  SSH_STANDIN_FORCED=COMMAND  run COMMAND instead, with SSH_ORIGINAL_COMMAND set, as sshd does for an
                              authorized_keys command="..." (e.g. the real rrsync -ro DIR)
  SSH_STANDIN_CUT_AFTER=N     pass N bytes of the remote side's output, then kill it and exit 255 (a connection
                              that dropped mid-transfer)
"""
import json
import os
import subprocess
import sys

WITH_VALUE = set("bcDEeFIiJLlmOopQRSWw")


def split(argv):
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if word[-1] in WITH_VALUE and len(word) == 2:
            index += 2
        else:
            index += 1
    return argv[index], argv[index + 1:]


def main():
    if os.environ.get("SSH_STANDIN_LOG"):
        with open(os.environ["SSH_STANDIN_LOG"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(sys.argv[1:]) + "\n")
    _host, command = split(sys.argv[1:])
    command = " ".join(command)
    env = dict(os.environ)
    forced = env.pop("SSH_STANDIN_FORCED", None)
    if forced:
        env["SSH_ORIGINAL_COMMAND"] = command
        command = forced
    cut = env.pop("SSH_STANDIN_CUT_AFTER", None)
    if cut is None:
        os.execve("/bin/sh", ["sh", "-c", command], env)
    left = int(cut)
    proc = subprocess.Popen(["/bin/sh", "-c", command], env=env, stdout=subprocess.PIPE)
    out = sys.stdout.buffer
    while True:
        chunk = proc.stdout.read1(65536) if left > 0 else b""
        if not chunk:
            break
        out.write(chunk[:left])
        out.flush()
        left -= len(chunk)
    if left <= 0:
        proc.kill()
        proc.wait()
        sys.exit(255)
    sys.exit(proc.wait())


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Counts Ansible's round trips to each host: an ssh (or sftp/scp) wrapper for the ssh connection plugin that
# appends one line per invocation to the log named by COUNT_SSH_LOG, then execs the real program. Used by
# lab/bench-fleet.sh; `lab/fleet_bench.py runs LOG N` turns the log into counts per host.
#   COUNT_SSH_LOG=/tmp/ssh.log ANSIBLE_SSH_EXECUTABLE=$PWD/lab/count-ssh.sh ansible -m ansible.builtin.ping all
# Transfers too: ANSIBLE_SFTP_EXECUTABLE / ANSIBLE_SCP_EXECUTABLE pointing at lab/count-sftp.sh / lab/count-scp.sh
# (links to this script; the name it is called by picks the real program).
# A line: host:port <TAB> kind <TAB> seconds since the epoch, kind being
#   module    the remote command runs a Python interpreter (a module run: with pipelining, Ansible's
#             `/bin/sh -c '/usr/bin/python3 && sleep 0'` with the module on stdin; else `python3 .../AnsiballZ_x.py`)
#   shell     any other remote command (a round trip of the shell: mkdir/rm of a temporary dir, echo ~, raw)
#   transfer  an sftp or scp run (a file put or fetched)
#   control   ssh -O check/stop/exit (the control master's bookkeeping)
# The port is the -o Port= Ansible passes (22 when there is none); the lab's hosts all share 127.0.0.1, so
# host:port is what tells them apart. The real program: COUNT_SSH_REAL, else ssh/sftp/scp from PATH.
set -u
: "${COUNT_SSH_LOG:?count-ssh: COUNT_SSH_LOG names the log to append to}"
case "${0##*/}" in
  *sftp*) program=sftp ;;
  *scp*) program=scp ;;
  *) program=ssh ;;
esac
real="${COUNT_SSH_REAL:-$program}"

port=22 host="" remote="" control=0 prev=""
for arg in "$@"; do
  case "$prev" in
    -o) case "$arg" in Port=*) port="${arg#Port=}" ;; esac ;;
    -O) control=1 ;;
  esac
  prev="$arg"
done
if [ "$program" = ssh ]; then
  if [ "$control" = 1 ]; then
    kind=control host="${*: -1}"
  else
    kind=shell host="${*: -2:1}" remote="${*: -1}"
    # A word that is a Python interpreter (python, python3, /usr/bin/python3.11, ...), or a module file.
    if [[ "$remote" =~ (^|[[:space:]\'\"/])python[0-9.]*([[:space:]\'\";&]|$) || "$remote" == *AnsiballZ_* ]]; then
      kind=module
    fi
  fi
elif [ "$program" = sftp ]; then
  kind=transfer host="${*: -1}"
else
  kind=transfer
  for arg in "$@"; do
    case "$arg" in -*|*=*) ;; *\]:*) host="${arg%%]:*}]" ;; *:*) host="${arg%%:*}" ;; esac
  done
fi
host="${host#*@}" host="${host#[}" host="${host%]}"   # user@ and sftp/scp's [brackets] dropped
printf '%s:%s\t%s\t%s\n' "$host" "$port" "$kind" "${EPOCHREALTIME:-0}" >> "$COUNT_SSH_LOG"
exec "$real" "$@"

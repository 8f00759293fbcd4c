#!/usr/bin/python3
"""Runs a command and prints "SECONDS PEAK_ANON_KIB": its wall time and the
largest anonymous resident memory (RssAnon of /proc/PID/status) seen while
polling every millisecond.  Unlike the maximum RSS of time(1), RssAnon
leaves out the pages of mapped files, so a tool that maps its input is
charged only for the memory it allocates.

Usage: peak_anon.py COMMAND [ARGS...]   (stdout of COMMAND is discarded)
"""
import subprocess
import sys
import time


def rss_anon_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
peak = 0
while proc.poll() is None:
    peak = max(peak, rss_anon_kib(proc.pid))
    time.sleep(0.001)
elapsed = time.perf_counter() - start
if proc.returncode != 0:
    sys.exit(f"peak_anon.py: {sys.argv[1]} exited with {proc.returncode}")
print(f"{elapsed:.4f} {peak}")

#!/usr/bin/env python3
"""bench/idlethreads.py: a process of many idle threads and one busy one.

What a walk of the threads costs per thread: THREADS threads (200) wait on
one event for the whole run while the main thread computes in 1 ms bursts
between 1 ms sleeps, for SECONDS (6). Compare the profiler CPU and lost
events that `wallprof record` reports in each accounting:

    for acc in walk resume; do
        WALLPROF_ACCOUNTING=$acc wallprof record -o /tmp/idle-$acc.pb.gz -- python3 bench/idlethreads.py
    done
"""
import os
import threading
import time

n = int(os.environ.get("THREADS", "200"))
seconds = float(os.environ.get("SECONDS", "6"))
ev = threading.Event()
threads = [threading.Thread(target=ev.wait) for _ in range(n)]
for t in threads:
    t.start()
end = time.time() + seconds
x = 0
while time.time() < end:
    for i in range(20000):
        x += i
    time.sleep(0.001)
ev.set()
for t in threads:
    t.join()

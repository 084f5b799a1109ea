#!/usr/bin/env python3
"""Checks a merged step timeline (accel timeline merge) of a data-parallel run: both ranks present, each
gradient bucket's all-reduce starts during its backward (after the bucket's last gradient) and ends before
the step's optimizer update ends, the buckets of each backward add up to the bytes all-reduced (the model's
gradient bytes and its buckets' alignment padding), each
synchronising backward ends with one "all-reduce wait" whose figures add up (overlapped + exposed = reduce,
the measured wait at least the exposed time), and the ring kept at most STEPS_KEPT optimizer steps.

usage: timeline_check.py MERGED.json BUCKET_BYTES STEPS_KEPT RANKS"""
import json
import sys

path, bucket_bytes, steps_kept, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
events = json.load(open(path))
names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
assert sorted({pid for pid, _ in names}) == list(range(ranks)), names
assert all(names[(rank, 2)] == "communication" for rank in range(ranks))

for rank in range(ranks):
    mine = sorted((e for e in events if e["ph"] == "X" and e["pid"] == rank), key=lambda e: e["ts"])
    backwards = [e for e in mine if e["name"] == "backward"]
    steps = [e for e in mine if e["name"] == "optimizer step"]
    buckets = [e for e in mine if e["name"].startswith("all-reduce bucket")]
    waits = [e for e in mine if e["name"] == "all-reduce wait"]
    assert 0 < len(steps) <= steps_kept, (rank, len(steps))
    assert buckets and all(e["tid"] == 2 for e in buckets)
    assert all(e["tid"] == 1 for e in backwards + steps)
    for backward in backwards:
        end = backward["ts"] + backward["dur"]
        inside = [b for b in buckets if backward["ts"] <= b["ts"] <= end]
        after = [s for s in steps if s["ts"] >= end]
        if not after:
            continue  # the ring may cut the trace after the last backward
        step_end = after[0]["ts"] + after[0]["dur"]
        for bucket in inside:
            assert bucket["ts"] + bucket["dur"] <= step_end, ("a bucket ends after its step", bucket, after[0])
        assert sum(b["args"]["bytes"] for b in inside) == bucket_bytes, (rank, backward, inside)
        [wait] = [w for w in waits if backward["ts"] <= w["ts"] <= end]
        assert wait["tid"] == 1 and wait["ts"] + wait["dur"] <= end + 1e-3, (wait, backward)
        figures = wait["args"]
        assert figures["bytes"] == bucket_bytes, figures
        assert abs(figures["overlapped_us"] + figures["exposed_us"] - figures["reduce_us"]) <= 1e-3, figures
        assert figures["wait_us"] >= figures["exposed_us"] - 1e-3, figures
    assert all(any(b["ts"] <= bucket["ts"] <= b["ts"] + b["dur"] for b in backwards) for bucket in buckets), \
        "a bucket started outside every backward"
print("timeline: %d ranks; buckets nest in backward and end before the step; %d bytes all-reduced a step"
      % (ranks, bucket_bytes))

#!/usr/bin/env python3
"""Draws the scalars of a run (RUN_DIR/metrics.jsonl, written by accel's trackers) against step, one panel
per scalar, into a PNG of 800 x 250*panels pixels. Run by `accel plot`.

usage: plot_run.py RUN_DIR OUT.png"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

run_dir, out = sys.argv[1], sys.argv[2]
series = {}
with open(run_dir + "/metrics.jsonl") as lines:
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line a killed run left half-written
        for name, value in record.items():
            if name not in ("step", "wall_time") and value is not None and math.isfinite(value):
                series.setdefault(name, []).append((record["step"], value))
if not series:
    sys.exit("accel plot: %s/metrics.jsonl holds no scalar" % run_dir)

figure, axes = plt.subplots(len(series), 1, figsize=(8, 2.5 * len(series)), dpi=100, sharex=True, squeeze=False)
for panel, (name, points) in zip(axes[:, 0], sorted(series.items())):
    points.sort()
    panel.plot([step for step, _ in points], [value for _, value in points], linewidth=1.2,
               marker="o" if len(points) < 30 else None, markersize=3)
    panel.set_ylabel(name)
    panel.grid(True, alpha=0.3)
axes[-1, 0].set_xlabel("step")
figure.suptitle(run_dir.rstrip("/").split("/")[-1])
figure.tight_layout()
figure.savefig(out)
print("accel plot: %d scalar%s -> %s" % (len(series), "" if len(series) == 1 else "s", out))

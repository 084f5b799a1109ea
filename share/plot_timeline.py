#!/usr/bin/env python3
"""Draws the last steps of a step timeline (a trace accel wrote, or their merge) as a picture: a row per
rank and track, a bar per event, so a timeline can be looked at without a trace viewer. Run by
`accel timeline plot`.

usage: plot_timeline.py TRACE.json OUT.png STEPS"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

trace, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = [e for e in json.load(open(trace)) if e.get("ph") == "X"]
if not events:
    sys.exit("accel timeline plot: %s holds no event" % trace)

# The window: the last `steps` training steps of the first rank, from the end of the optimizer step
# before them to the end of the last one (what came after training, an evaluation, is left out).
first_rank = min(e["pid"] for e in events)
ends = sorted(e["ts"] + e["dur"] for e in events if e["name"] == "optimizer step" and e["pid"] == first_rank)
if not ends:
    sys.exit("accel timeline plot: %s holds no optimizer step" % trace)
window_start = ends[-steps - 1] if len(ends) > steps else min(e["ts"] for e in events)
window_end = ends[-1]
shown = [e for e in events if e["ts"] >= window_start and e["ts"] < window_end]
origin = min(e["ts"] for e in shown)

COLOURS = {"forward": "#4C72B0", "evaluate": "#4C72B0", "backward": "#DD8452", "optimizer step": "#55A868",
           "loader wait": "#8172B3", "save_model": "#937860"}
rows = sorted({(e["pid"], e["tid"]) for e in shown})
figure, axis = plt.subplots(figsize=(10, 0.6 * len(rows) + 1.2), dpi=100)
for index, row in enumerate(rows):
    for event in (e for e in shown if (e["pid"], e["tid"]) == row):
        colour = "#C44E52" if event["name"].startswith("all-reduce") else COLOURS.get(event["name"], "#8C8C8C")
        axis.broken_barh([((event["ts"] - origin) / 1000, event["dur"] / 1000)], (index - 0.35, 0.7),
                         facecolors=colour, edgecolor="white", linewidth=0.3)
axis.set_yticks(range(len(rows)))
axis.set_yticklabels(["rank %d %s" % (pid, "main" if tid == 1 else "communication") for pid, tid in rows])
axis.invert_yaxis()
axis.set_xlabel("ms")
legend = [("forward", COLOURS["forward"]), ("backward", COLOURS["backward"]), ("all-reduce", "#C44E52"),
          ("optimizer step", COLOURS["optimizer step"]), ("loader wait", COLOURS["loader wait"]),
          ("collective, other", "#8C8C8C")]
axis.legend(handles=[matplotlib.patches.Patch(color=c, label=n) for n, c in legend], loc="upper center",
            bbox_to_anchor=(0.5, -0.35), ncol=6, fontsize=8, frameon=False)
axis.set_title("the last %d steps" % steps)
figure.tight_layout()
figure.savefig(out)
print("accel timeline plot: %d events -> %s" % (len(shown), out))

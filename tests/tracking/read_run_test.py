#!/usr/bin/env python3
"""Checks what the trackers write, with readers written here independently of accel: the TensorBoard
event files (TFRecord framing, masked CRC-32C from its own table, Event/Summary protobufs decoded by hand),
the JSONL and the CSV files; then that a resumed run appends after the last logged step instead of
repeating steps, and that a torn last line left by a killed run is cut off.

usage: read_run_test.py WRITE_RUN_PROGRAM"""
import csv
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

WRITE_RUN = sys.argv[1]


def crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = crc32c_table()


def masked_crc(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ TABLE[(crc ^ byte) & 0xFF]
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data):
    """(field number, wire type, value) of a protobuf message."""
    at = 0
    while at < len(data):
        tag, at = varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        elif wire == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
        else:
            raise AssertionError("wire type %d" % wire)
        yield number, wire, value


def read_events(path):
    """Every Event in the file as (wall_time, step, file_version, {tag: value}), checking both CRCs."""
    content = open(path, "rb").read()
    at, events = 0, []
    while at < len(content):
        header = content[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", content[at + 8:at + 12])
        assert length_crc == masked_crc(header), "length CRC at %d" % at
        data = content[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", content[at + 12 + length:at + 16 + length])
        assert data_crc == masked_crc(data), "data CRC at %d" % at
        at += 16 + length
        wall_time, step, version, values = None, 0, None, {}
        for number, wire, value in fields(data):
            if number == 1:
                (wall_time,) = struct.unpack("<d", value)
            elif number == 2:
                step = value
            elif number == 3:
                version = value.decode()
            elif number == 5:
                for summary_field, _, entry in fields(value):
                    assert summary_field == 1
                    tag = simple = None
                    for value_field, value_wire, item in fields(entry):
                        if value_field == 1:
                            tag = item.decode()
                        elif value_field == 2:
                            assert value_wire == 5
                            (simple,) = struct.unpack("<f", item)
                    values[tag] = simple
        events.append((wall_time, step, version, values))
    return events


def expected(first, last):
    """{step: {name: value}} that write_run logs."""
    steps = {}
    for step in range(first, last + 1):
        steps.setdefault(step, {}).update({"loss": 1.0 / (step + 1), "lr": step / 1000.0})
        if step % 10 == 0:
            steps[step]["accuracy"] = step / 100.0
    return steps


def write(run_dir, first, last, *flags):
    subprocess.run([WRITE_RUN, os.path.dirname(run_dir), os.path.basename(run_dir), str(first), str(last), *flags],
                   check=True)


def check_run(run_dir, last_step, runs):
    """Steps 0..last_step logged once each, by `runs` runs (an event file each)."""
    want = expected(0, last_step)
    event_files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    assert len(event_files) == runs, event_files
    got = {}
    for path in event_files:
        events = read_events(path)
        assert events[0][2] == "brain.Event:2", "the first record is not the file_version event"
        for wall_time, step, _, values in events[1:]:
            assert wall_time > 1.6e9
            got.setdefault(step, {}).update(values)
    assert sorted(got) == sorted(want), (sorted(got)[:5], sorted(want)[:5])
    for step, values in want.items():
        for name, value in values.items():
            assert math.isclose(got[step][name], value, rel_tol=1e-6), (step, name, got[step][name], value)

    lines = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    jsonl = {}
    for line in lines:
        assert line["wall_time"] > 1.6e9
        jsonl.setdefault(line["step"], {}).update({k: v for k, v in line.items() if k not in ("step", "wall_time")})
    assert jsonl == want, "JSONL differs"
    steps_in_order = [line["step"] for line in lines]
    assert steps_in_order == sorted(steps_in_order), "a step was written twice or out of order"

    rows = list(csv.DictReader(open(os.path.join(run_dir, "metrics.csv"))))
    table = {}
    for row in rows:
        table.setdefault(int(row["step"]), {})[row["name"]] = float(row["value"])
    assert table == want, "CSV differs"
    assert json.load(open(os.path.join(run_dir, "config.json"))) == {"lr": 0.001}


with tempfile.TemporaryDirectory() as project:
    run_dir = os.path.join(project, "run")
    write(run_dir, 0, 25)
    check_run(run_dir, 25, runs=1)
    # A resumed run repeats steps 20..25 (its checkpoint was older): they are not written twice.
    write(run_dir, 20, 40)
    check_run(run_dir, 40, runs=2)
    # A killed run leaves half a line: the next run cuts it off and goes on.
    with open(os.path.join(run_dir, "metrics.jsonl"), "a") as torn:
        torn.write('{"step":41,"wall_ti')
    write(run_dir, 41, 45)
    check_run(run_dir, 45, runs=3)
    # overwrite starts the metrics afresh: an earlier run's steps are gone, not skipped over.
    write(run_dir, 0, 12, "overwrite")
    check_run(run_dir, 12, runs=1)
print("tracker files verified: TensorBoard CRCs and values, JSONL, CSV, resume, torn line, overwrite")

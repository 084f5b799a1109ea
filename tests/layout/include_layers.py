"""The folders of src/ form layers: no file (header or implementation) includes a header of a folder that
(through its files) includes its own folder back. A folder is a directory of src/ (src/train/optim is
"train/optim"; files at an area's top are the area's). A loop means two folders can only be understood,
built and tested together: the shared piece belongs in a folder below both. Prints each loop of folders
and exits 1 when there is one.

Usage: include_layers.py [SRC]   (default: the src/ beside tests/)"""
import os
import re
import sys

INCLUDE = re.compile(r'^#include "([a-z0-9_/]+)/[a-z0-9_]+\.hpp"', re.MULTILINE)


def folder_graph(src):
    graph = {}
    for directory, _, files in os.walk(src):
        folder = os.path.relpath(directory, src)
        for name in files:
            if not name.endswith((".hpp", ".cpp")):
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as source:
                for target in INCLUDE.findall(source.read()):
                    if target != folder and os.path.isdir(os.path.join(src, target)):
                        graph.setdefault(folder, set()).add(target)
    return graph


def loops(graph):
    """The strongly connected groups of more than one folder (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(graph) | {target for targets in graph.values() for target in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
    found = loops(folder_graph(src))
    for group in found:
        print("src/ folders that include each other in a loop: " + ", ".join(group))
    if not found:
        print("src/ folders in layers: no loop through their includes")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""The model states a function refuses, as its header's comment names them in one sentence:
    Model states: unprepared host, unprepared torchscript -> ACCEL_ERR_INVALID_STATE; prepared host ->
    ACCEL_ERR_UNSUPPORTED.
(host: a model of the caller's tensors, accel_model_from_tensors; torchscript: accel_model_load). The
entry-point test calls the function with a model in each state named and expects that code."""
import re

from abi import HeaderError

MODEL_STATES = ("unprepared host", "prepared host", "unprepared torchscript", "prepared torchscript")


def refused_model_states(comment, where):
    """{state: code} from the comment's "Model states: ... -> CODE; ..." sentence; {} without one."""
    text = " ".join(line.strip().lstrip("/*").strip() for line in comment.splitlines())
    found = re.search(r"Model states:\s*(.*?)\.(\s|\*/|$)", text)
    refused = {}
    for clause in (found.group(1).split(";") if found else []):
        states, _, code = clause.partition("->")
        for state in (s.strip() for s in states.split(",")):
            if state not in MODEL_STATES or not re.fullmatch(r"ACCEL_ERR_\w+", code.strip()):
                raise HeaderError(f"{where}: unreadable model state clause {clause.strip()!r}; write "
                                 f"'STATE, STATE -> ACCEL_ERR_CODE' with states among {', '.join(MODEL_STATES)}")
            refused[state] = code.strip()
    return refused

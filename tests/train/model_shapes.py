"""The model shapes of the model-shapes suite (model_shapes_test.py): each a torch module that the suite
scripts once and both sides train from the same TorchScript file, and the settings it is trained under.

Only the suite's driver imports this (torch): the workers read the cases it writes out as JSON."""
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 3
VOCABULARY = 20


class ConvBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 4 * 4, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.head(x.flatten(1))


class LstmClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, 8)
        self.lstm = nn.LSTM(8, 12, batch_first=True)
        self.head = nn.Linear(12, CLASSES)

    def forward(self, tokens):
        _, (hidden, _) = self.lstm(self.embedding(tokens))
        return self.head(hidden[-1])


class EncoderClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Linear(6, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(self.embedding(x)).mean(1))


class Routed(nn.Module):
    """A trunk and two experts, the second used only where route says so (a mixture of experts' gate),
    and a layer forward never uses."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(8, 16)
        self.expert_a = nn.Linear(16, CLASSES)
        self.expert_b = nn.Linear(16, CLASSES)
        self.spare = nn.Linear(16, CLASSES)

    def forward(self, x, route):
        hidden = torch.relu(self.trunk(x))
        out = self.expert_a(hidden)
        if bool(route[0] > 0):
            out = out + self.expert_b(hidden)
        return out


class TiedLanguageModel(nn.Module):
    """The output layer's weight is the embedding's, as GPT-2 and T5 tie them."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, 8)
        self.mix = nn.Linear(8, 8)
        self.out = nn.Linear(8, VOCABULARY, bias=False)
        self.out.weight = self.embedding.weight

    def forward(self, tokens):
        return self.out(torch.tanh(self.mix(self.embedding(tokens))).mean(1))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class LossInDict(Mlp):
    def forward(self, x, y):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return {"loss": F.cross_entropy(logits, y), "logits": logits}


class LossInTuple(Mlp):
    def forward(self, x, y):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return F.cross_entropy(logits, y), logits


@dataclasses.dataclass
class Case:
    """inputs: forward's positional arguments in order, each "normal:<shape>" (float32), "tokens:<shape>"
    (int64 below VOCABULARY), "labels" (int64 below `classes`, one per row) or "route" (1 where this rank's
    step uses Routed's second expert). loss: "cross_entropy" of the output against labels, or "dict" /
    "tuple": forward returns the loss itself (under "loss", or first). no_sync: every group of that many
    micro-steps runs all but its last under an explicit no_sync, and the optimizer steps after the last."""

    name: str
    module: type
    inputs: list
    loss: str = "cross_entropy"
    classes: int = CLASSES
    broadcast_buffers: bool = True
    find_unused_parameters: bool = False
    accumulation: int = 1
    no_sync: int = 0
    mixed_precision: str = "no"

    def settings(self):
        settings = dataclasses.asdict(self)
        del settings["module"]
        return settings


CNN = ["normal:4,1,8,8"]
CASES = [
    Case("cnn_batchnorm", ConvBatchNorm, CNN),
    Case("cnn_batchnorm_no_buffer_broadcast", ConvBatchNorm, CNN, broadcast_buffers=False),
    Case("cnn_batchnorm_accumulation", ConvBatchNorm, CNN, accumulation=2),
    Case("cnn_batchnorm_no_sync", ConvBatchNorm, CNN, no_sync=2),
    Case("embedding_lstm", LstmClassifier, ["tokens:4,6"]),
    Case("transformer_encoder", EncoderClassifier, ["normal:4,5,6"]),
    Case("unused_parameters", Routed, ["normal:4,8", "route"], find_unused_parameters=True),
    Case("unused_parameters_accumulation", Routed, ["normal:4,8", "route"], find_unused_parameters=True,
         accumulation=2),
    Case("tied_weights", TiedLanguageModel, ["tokens:4,6"], classes=VOCABULARY),
    Case("loss_in_dict", LossInDict, ["normal:4,8", "labels"], loss="dict"),
    Case("loss_in_tuple", LossInTuple, ["normal:4,8", "labels"], loss="tuple"),
    Case("bf16_autocast", Mlp, ["normal:4,8"], mixed_precision="bf16"),
]
OPTIMIZERS = {"sgd": {"lr": 0.05, "momentum": 0.9}, "adamw": {"lr": 0.01, "weight_decay": 0.1}}
OPTIMIZER_STEPS = 20


def routes(ranks):
    """Which ranks use Routed's second expert at each micro-step, in turn: all, the first only, all but the
    first, none."""
    return [(1,) * ranks, (1,) + (0,) * (ranks - 1), (0,) + (1,) * (ranks - 1), (0,) * ranks]

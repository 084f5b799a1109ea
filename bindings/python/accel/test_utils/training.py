"""accel.test_utils.training: Accelerate's small regression problem for tests: y = a * x + b with noise, and
the two-parameter model that fits it. The same seed gives the same samples as Accelerate's."""
import numpy as np
import torch


class RegressionDataset:
    """length samples {"x": float32, "y": float32}, x standard normal and y = a * x + b plus normal noise of
    scale 0.1, drawn from numpy's default_rng(seed)."""

    def __init__(self, a=2, b=3, length=64, seed=None):
        generator = np.random.default_rng(seed)
        self.length = length
        self.x = generator.normal(size=(length,)).astype(np.float32)
        self.y = a * self.x + b + generator.normal(scale=0.1, size=(length,)).astype(np.float32)

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


class RegressionModel(torch.nn.Module):
    """x * a + b with scalar parameters a and b (float32). Its first forward prints the parameters' and the
    input's dtypes ("Model dtype: ..."), which tests of mixed precision read. double_output: Accelerate's
    argument, unused there too."""

    def __init__(self, a=0, b=0, double_output=False):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(a).float())
        self.b = torch.nn.Parameter(torch.tensor(b).float())
        self.first_batch = True

    def forward(self, x=None):
        if self.first_batch:
            print(f"Model dtype: {self.a.dtype}, {self.b.dtype}. Input dtype: {x.dtype}")
            self.first_batch = False
        return x * self.a + self.b


class RegressionModel4XPU(torch.nn.Module):
    """RegressionModel with a and b as 2-element parameters ([2, 3]) of which forward uses the first (a
    layout Accelerate's XPU tests need); a, b and double_output are accepted and unused, as there."""

    def __init__(self, a=0, b=0, double_output=False):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor([2, 3]).float())
        self.b = torch.nn.Parameter(torch.tensor([2, 3]).float())
        self.first_batch = True

    def forward(self, x=None):
        if self.first_batch:
            print(f"Model dtype: {self.a.dtype}, {self.b.dtype}. Input dtype: {x.dtype}")
            self.first_batch = False
        return x * self.a[0] + self.b[0]

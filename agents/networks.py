"""The few network building blocks shared across learners and models.

``EnsembleLinear`` evaluates E independent linear layers in one batched matmul;
an ensemble of critics (or of dynamics models) is a stack of them, so E members
cost one kernel launch per layer instead of E.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import Tensor, nn

from envs.errors import ReverieError


PRECISIONS = {"float32": None, "bfloat16": torch.bfloat16}
PRECISION_CHOICES = (*PRECISIONS, "auto")


def check_precision(option: str, value: str) -> None:
    """Refuse a precision setting (``train.precision``, ``world_model.precision``, ...) that is not one of
    ``PRECISION_CHOICES``, naming the option."""
    if value not in PRECISION_CHOICES:
        raise ReverieError(f"{option}: expected {', '.join(PRECISIONS)} or auto, got {value!r}")


def native_bfloat16(device_type: str = "cpu") -> bool:
    """Whether this machine has bfloat16 kernels of its own: a CUDA GPU that supports it, or a CPU that
    oneDNN runs bfloat16 on (AVX-512, AMX). Elsewhere (an AVX2-only CPU) autocast emulates it, and
    MOBILE's update ran at 0.9 updates/s in bfloat16 where it runs at ~13 in float32."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(precision: str, device_type: str = "cpu") -> str:
    """``auto``: bfloat16 where the machine has it natively (``native_bfloat16``), float32 elsewhere."""
    if precision == "auto":
        return "bfloat16" if native_bfloat16(device_type) else "float32"
    return precision


def update_precision(precision: str, device_type: str = "cpu"):
    """An update's arithmetic: float32, or ``precision``'s lower precision under autocast.

    Without autocast's cache of cast weights: an update steps one network and then uses it (IQL's value
    net, then its Q target), and the cache, kept for the whole context, would serve the weights from
    before the step (no slower without it here: RAVL, SAC and IQL updates within 3%)."""
    dtype = PRECISIONS[precision]
    return torch.autocast(device_type, dtype=dtype, enabled=dtype is not None, cache_enabled=False)


def full_precision(x: Tensor):
    """A block computed in float32 even inside a lower-precision autocast (``train.precision``)."""
    return torch.autocast(x.device.type, enabled=False)


def backprop(loss: Tensor) -> None:
    """``loss.backward()`` with autocast off, as torch advises (autocast is for forward passes). Each
    gradient op then runs in the dtype its forward op ran in: bfloat16 for the hidden layers autocast ran in
    bfloat16, float32 for the output layers and NEUBAY's GRUs (``full_precision``). Left on, autocast
    casts those float32 backward matmuls down to bfloat16 too: the engine runs a backward pass under the
    autocast state of its ``backward()`` call, and an update calls it inside ``train.precision``'s autocast."""
    with full_precision(loss):
        loss.backward()


class Fused:
    """torch's Adam (or AdamW) on its fused kernel: one pass over each parameter tensor per step, where the
    default on the CPU is about ten elementwise ops per tensor. The same algorithm (weights within rounding
    of each other); a learner's whole update 1.02-1.31x faster (RAVL 1.10x and SAC 1.06x in bfloat16, TD3+BC
    1.18-1.31x: ``tests/bench/bench_learners.py``, one thread, beside two grid jobs on two cores), an ensemble
    fit's step 1.05-1.18x (``tests/bench/bench_fit.py``).

    A checkpoint written before the kernel was chosen (its groups say ``fused: None``) keeps its moments
    and step counts on loading, and steps fused from then on."""

    def __init__(self, params, lr: float = 1e-3, **kwargs):
        super().__init__(params, lr=lr, fused=True, **kwargs)

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            group["fused"] = True


class FusedAdam(Fused, torch.optim.Adam):
    """The learners' optimiser (``Fused``)."""


class FusedAdamW(Fused, torch.optim.AdamW):
    """The world models' fits' optimiser where weight decay is decoupled (``Fused``)."""


class OutputLinear(nn.Linear):
    """A network's last layer, always in float32: under ``train.precision=bfloat16`` the hidden layers'
    matmuls run in bfloat16 (8 bits of mantissa), but a Q-value of 300 must still resolve a reward of
    0.1, and a log-probability its tails. Its parameters are an ``nn.Linear``'s, so checkpoints are the same."""

    def forward(self, x: Tensor) -> Tensor:
        with full_precision(x):
            return super().forward(x.float())


def mlp(in_dim: int, out_dim: int, hidden: tuple[int, ...] = (256, 256), act=nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        layers += [nn.Linear(d, h), act()]
        d = h
    layers.append(OutputLinear(d, out_dim))
    return nn.Sequential(*layers)


@contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """The module's parameters take no gradient inside the block (inputs still do).

    An actor's loss backpropagates through the critic to the action; the
    critic's own weight gradients would be thrown away by its next
    ``zero_grad``. Skipping them leaves every update bit-identical and makes it
    1.1x (SAC) to 1.26x (RAVL, TD3+BC) faster: ``tests/bench/bench_learners.py``."""
    flags = [p.requires_grad for p in module.parameters()]
    module.requires_grad_(False)
    try:
        yield module
    finally:
        for p, flag in zip(module.parameters(), flags):
            p.requires_grad_(flag)


class EnsembleLinear(nn.Module):
    """E linear layers applied at once: ``[E, B, in] -> [E, B, out]``."""

    def __init__(self, members: int, in_dim: int, out_dim: int):
        super().__init__()
        self.members, self.in_dim, self.out_dim = members, in_dim, out_dim
        self.weight = nn.Parameter(torch.empty(members, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(members, 1, out_dim))
        bound = 1.0 / math.sqrt(in_dim)
        # Same initialisation as nn.Linear, member by member.
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        """``members``: evaluate only these (indices), in their order: ``[len(members), B, out]``."""
        weight, bias = (self.weight, self.bias) if members is None else (self.weight[members], self.bias[members])
        if x.ndim == 2:  # one batch shared by every member
            x = x.unsqueeze(0).expand(len(weight), -1, -1)
        return torch.baddbmm(bias, x, weight)

    def extra_repr(self) -> str:
        return f"members={self.members}, in_dim={self.in_dim}, out_dim={self.out_dim}"


class EnsembleMLP(nn.Module):
    """E MLPs evaluated together: ``[B, in]`` or ``[E, B, in]`` -> ``[E, B, out]``."""

    def __init__(self, members: int, in_dim: int, out_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        dims = (in_dim, *hidden, out_dim)
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.members = members

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        """``members``: evaluate only these heads (e.g. REDQ's target subset); the rest cost nothing."""
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x, members))
        with full_precision(x):          # the output layer in float32, as OutputLinear
            return self.layers[-1](x.float(), members)


class TanhActor(nn.Module):
    """A deterministic policy ``a = tanh(MLP(s))`` in [-1, 1]^act_dim."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.obs_dim, self.act_dim, self.hidden = obs_dim, act_dim, tuple(hidden)
        self.net = mlp(obs_dim, act_dim, self.hidden)

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.net(obs))

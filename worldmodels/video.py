"""``VideoWorldModel``: an action-conditioned video model behind the same step contract.

A frame autoencoder plus latent dynamics (the "VAE plus latent dynamics" design,
with a deterministic autoencoder): frames (64x64 RGB) are encoded to a small
latent ``z`` relative to a reference frame, the first frame of the imagined
episode (``reference=first``, the default): the decoder copies that frame
where a mask says nothing changed and adds the change elsewhere, so what the arm has not
touched (the goal marker, an object not yet moved: two or three pixels each at
64x64) comes back sharp instead of being averaged away into a latent of 64
numbers. A ``GaussianEnsemble`` predicts the next latent, the next
proprioception and the reward from the latent state ``[z_t, z_{t-1}, proprio_t]``
(two context frames: position and motion) and the action; the decoder turns the
predicted latent back into a frame. The model's observation is the frame
itself, flattened, with the proprioception after it (``obs_dim = 3 S^2 + 4``,
pixels in [0, 1], row-major HWC), so ``rollout()`` and ``reverie evaluate``
drive it unchanged.

Against drift over long rollouts the dynamics train on context latents with
Gaussian noise added (``context_noise``, in units of each latent's spread;
DIAMOND's noise augmentation), so a slightly wrong latent is pulled back
toward the data rather than compounding. An inverse-dynamics model
``(z_t, z_{t+1}) -> a_t`` says whether generated frames still follow the
actions: with ``uncertainty=inverse_dynamics`` its error is the step's
uncertainty (truncation at a quantile of what it shows on the data then cuts
rollouts that stopped following their actions); by default the uncertainty
is the ensemble's disagreement in latent space.

Each imagined step carries a success probability (``StepOut.success``). By
default it is the ``SuccessJudge`` (``worldmodels.judge``) reading the frame the
model shows beside the episode's first frame, a classifier of frames alone,
trained on real episodes (``fit_judge``; the ``poor`` and ``misdirected``
levels give it failures that look purposeful). The older success head on the
latent state and the proprioception (``success_on=latent``, or ``frame`` for the latent of the shown
frame) stays for comparison: it reads "the hand is at the goal" as success.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import check_precision, resolve_precision, update_precision
from envs.errors import ReverieError
from envs.manipulation import OBJECT_DIM
from worldmodels.base import FitCheckpoint, WorldModel
from worldmodels.contract import ModelSpec, StepOut, check_batch
from worldmodels.ensemble import EnsembleConfig, GaussianEnsemble, Normalizer
from worldmodels.judge import (HOLDS, SuccessJudge, choose_hold, chw, first_frame_index, fit_judge, judge_rates,
                               split_episodes)

CHECKPOINT_FORMAT = "reverie.video/1"
PROPRIO = 4
SUCCESS_RELATION = 7       # the head's relation features: the object's offset from the goal, its length, the goal
CARRY_MIN_MOVE = 1e-3      # metres: a step whose hand moved less along an axis says nothing of the object's share there
MOVERS = ("free", "carry", "matrix")       # world_model.mover's forms (CarryMover, MatrixMover, a plain net)


@dataclass
class VideoConfig:
    latent: int = 64
    channels: int = 32                  # encoder widths: c, 2c, 2c (three stride-2 convolutions)
    reference: str = "first"            # the decoder draws the change from: first (the episode's first frame) or
                                        # mean (the data's mean frame)
    ae_epochs: int = 8
    ae_batch: int = 32
    ae_lr: float = 1e-3
    precision: str = "float32"          # the autoencoder's and the latent dynamics' updates: float32, bfloat16
                                        # (autocast; the autoencoder in channels-last memory, the dynamics' output
                                        # layer in float32) or auto (bfloat16 where the CPU or GPU has it natively)
    motion_weight: float = 10.0         # pixels weighted 1 + k * (their spread over the data) / (mean spread)
    context_noise: float = 0.1          # std of the noise on context latents when training the dynamics
    members: int = 5                    # latent dynamics ensemble
    elites: int = 4
    hidden: tuple[int, ...] = (256, 256, 256)
    max_epochs: int = 60
    patience: int = 5
    head_epochs: int = 20               # inverse dynamics and success heads
    unroll_steps: int = 0               # > 0: then train the dynamics on their own k-step predictions
    unroll_epochs: int = 3
    unroll_lr: float = 1e-4
    uncertainty: str = "disagreement"   # or inverse_dynamics
    success_on: str = "judge"           # the frame judge; or latent / frame: the success head on the predicted
                                        # latent / on the shown frame's latent (with proprioception); or objects:
                                        # a head on the proprioception and the object and goal positions
    objects: bool = False               # the simulator's object and goal positions (a dataset's
                                        # privileged/objects) join the latent state: the dynamics predict them,
                                        # a reader infers them from the start frame
    reader_steps: int = 3000            # the object reader's updates (batches of 64 real frames)
    success_inputs: str = "relation"    # the head on positions reads: relation (the object's offset from the goal,
                                        # its length, and the goal: what MetaWorld's success measures) or state
                                        # (the proprioception, object and goal as they are: it may read a closed
                                        # gripper at the right place as success, a shortcut the data allow)
    object_mover: bool = False          # with objects: the object's change comes from a net that sees only what
                                        # contact depends on (the hand relative to the object, the gripper, the
                                        # action), not the goal or the frame; the goal stays where it is
    mover: str = "free"                 # free: that net gives the object's change; carry: it gives a gate per axis
                                        # and the object takes that share of the hand's own predicted change;
                                        # matrix: it also reads the object relative to the goal and gives a 3x3
                                        # map of the hand's change (a door's handle turns along its arc)
    hand_mover: bool = False            # with objects: the proprioception's change comes from a net on the action,
                                        # the gripper, the hand relative to the object and the object relative to
                                        # the goal (MetaWorld's hand follows the action, slowed by what it holds),
                                        # not from the latent dynamics
    hand_members: int = 1               # hand movers fitted apart (their own initial weights and batch order) and
                                        # averaged (two fits of one net, alike in training error, moved a weak
                                        # policy's hand differently enough to rank push at 0.77 and 0.91; five
                                        # did not settle it: assets/reports/manipulation/ranking.md)
    hand_horizon: int = 16              # hand movers fitted one step at a time, then fine-tuned on open-loop unrolls
                                        # of this many steps of their own predictions (the objects real); 1: one
                                        # step only. MetaWorld's hand lags its mocap target, so a one-step fit
                                        # learns a short stride and its errors feed back; unrolled, three fits'
                                        # hands end 1.5-2.3 cm apart after 150 steps, not 12-27 cm (draws/
                                        # hand_horizon.py)
    hand_unroll_updates: int = 1000     # the unrolled fine-tuning's updates (batches of 256 windows)
    judge_steps: int = 3000             # the judge's updates (batches of 64, half of them successful frames)
    holdout_ratio: float = 0.1

    def validate(self) -> "VideoConfig":
        check_precision("world_model.precision", self.precision)
        if self.reference not in ("first", "mean"):
            raise ReverieError(f"world_model.reference: expected first or mean, got '{self.reference}'")
        if self.success_on not in ("judge", "latent", "frame", "objects"):
            raise ReverieError(f"world_model.success_on: expected judge, latent, frame or objects, "
                               f"got '{self.success_on}'")
        if self.success_on == "objects" and not self.objects:
            raise ReverieError("world_model.success_on=objects needs world_model.objects=true")
        if self.success_inputs not in ("relation", "state"):
            raise ReverieError(f"world_model.success_inputs: expected relation or state, got '{self.success_inputs}'")
        if self.mover not in MOVERS:
            raise ReverieError(f"world_model.mover: expected {', '.join(MOVERS[:-1])} or {MOVERS[-1]}, "
                               f"got '{self.mover}'")
        if self.hand_members < 1:
            raise ReverieError(f"world_model.hand_members: expected an integer >= 1, got {self.hand_members}")
        if self.hand_horizon < 1 or self.hand_unroll_updates < 0:
            raise ReverieError(f"world_model.hand_horizon, hand_unroll_updates: expected integers >= 1 and >= 0, "
                               f"got {self.hand_horizon} and {self.hand_unroll_updates}")
        if self.hand_mover and not self.objects:
            raise ReverieError("world_model.hand_mover=true needs world_model.objects=true: it reads where the "
                               "object is, which the latent state holds only then")
        if self.object_mover and not self.objects:
            raise ReverieError("world_model.object_mover=true needs world_model.objects=true: it moves the "
                               "objects' positions, which the latent state holds only then")
        if self.uncertainty not in ("disagreement", "inverse_dynamics"):
            raise ReverieError(f"world_model.uncertainty: expected disagreement or inverse_dynamics, "
                               f"got '{self.uncertainty}'")
        if not 1 <= self.elites <= self.members:
            raise ReverieError(f"world_model: expected 1 <= elites <= members, got elites={self.elites}, "
                               f"members={self.members}")
        if self.unroll_steps < 0 or self.unroll_epochs < 0:
            raise ReverieError(f"world_model.unroll_steps and unroll_epochs: expected integers >= 0, got "
                               f"{self.unroll_steps} and {self.unroll_epochs}")
        for name in ("latent", "channels", "ae_epochs", "ae_batch", "max_epochs", "head_epochs", "judge_steps",
                     "reader_steps"):
            if getattr(self, name) < 1:
                raise ReverieError(f"world_model.{name}: expected a positive integer, got {getattr(self, name)}")
        return self

    def key_omits(self) -> set[str]:
        """Options with no effect on this fit, left out of its name (``base.fit_identity``): models cached
        before such an option was added keep their keys."""
        omits = set() if self.objects else {"success_inputs"}
        if not self.hand_mover:
            omits |= {"hand_members", "hand_horizon", "hand_unroll_updates"}
        elif self.hand_horizon == 1:
            omits.add("hand_unroll_updates")
        return omits


def image_size_of(obs_dim: int) -> int:
    s = int(round(math.sqrt((obs_dim - PROPRIO) / 3)))
    if 3 * s * s + PROPRIO != obs_dim or s % 8:
        raise ReverieError(f"video world model: obs_dim {obs_dim} is not 3*S*S + {PROPRIO} for a frame size S "
                           "divisible by 8")
    return s


def frames_to_obs(images: np.ndarray | Tensor, states: np.ndarray | Tensor) -> Tensor:
    """uint8 frames ``[N, S, S, 3]`` and proprioception ``[N, 4]`` -> observations ``[N, 3 S^2 + 4]``."""
    images = torch.as_tensor(images)
    x = images.reshape(len(images), -1).float() / 255.0
    return torch.cat([x, torch.as_tensor(states).float()], dim=1)


def obs_to_frames(obs: Tensor, size: int) -> Tensor:
    """Observations -> frames ``[N, 3, S, S]`` in [0, 1] (channels first, for the convolutions)."""
    return obs[:, :-PROPRIO].reshape(-1, size, size, 3).permute(0, 3, 1, 2)


class FrameAutoencoder(nn.Module):
    """Frames ``[N, 3, S, S]`` in [0, 1] <-> latents. With ``reference``, both directions also take a reference
    frame (the episode's first): the encoder sees it beside the frame, and the decoder adds to the reference a
    change gated pixel by pixel by a mask (its last convolution sees the reference too), so what did not change is
    copied exactly and what moved is drawn (the masks of video prediction, Finn et al. 2016). On the tests'
    reach scenes, against compositing the reference with new content (mask * content + (1 - mask) * ref): scene
    details as well kept (error 0.009 against 0.012), the moving arm half the error (0.063 against 0.117)."""

    def __init__(self, size: int, latent: int, c: int, reference: bool = False):
        super().__init__()
        self.size, self.s8, self.reference = size, size // 8, reference
        self.enc = nn.Sequential(nn.Conv2d(6 if reference else 3, c, 4, 2, 1), nn.SiLU(),
                                 nn.Conv2d(c, 2 * c, 4, 2, 1), nn.SiLU(),
                                 nn.Conv2d(2 * c, 2 * c, 4, 2, 1), nn.SiLU(), nn.Flatten(),
                                 nn.Linear(2 * c * self.s8 ** 2, latent))
        self.dec_in = nn.Linear(latent, 2 * c * self.s8 ** 2)
        self.dec = nn.Sequential(nn.SiLU(), nn.ConvTranspose2d(2 * c, 2 * c, 4, 2, 1), nn.SiLU(),
                                 nn.ConvTranspose2d(2 * c, c, 4, 2, 1), nn.SiLU(),
                                 nn.ConvTranspose2d(c, c if reference else 3, 4, 2, 1))
        if reference:             # a change and its mask from the decoder's features and the reference
            self.out = nn.Sequential(nn.SiLU(), nn.Conv2d(c + 3, 4, 3, 1, 1))
            nn.init.constant_(self.out[1].bias[3], -2.0)    # start out mostly copying the reference
        self.c = c
        # without a reference, the decoder draws the change from the data's mean frame: a fixed scene and camera
        # make most pixels static, so capacity goes to what moves (the arm, the objects)
        self.register_buffer("mean_frame", torch.full((3, size, size), 0.5))

    def encode(self, frames: Tensor, ref: Tensor | None = None) -> Tensor:
        return self.enc(torch.cat([frames, ref], 1) if self.reference else frames)

    def decode(self, z: Tensor, ref: Tensor | None = None) -> Tensor:
        h = self.dec(self.dec_in(z).reshape(-1, 2 * self.c, self.s8, self.s8))
        if self.reference:            # each pixel: the reference's, plus a change where the mask opens
            o = self.out(torch.cat([h, ref], 1))
            return (ref + torch.sigmoid(o[:, 3:]) * o[:, :3]).clamp(0, 1)
        return (self.mean_frame + h).clamp(0, 1)


def _mlp(i: int, o: int, h: int = 256) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, o))


class CarryMover(nn.Module):
    """The object's change as a share of the hand's: ``g * d_hand``, the gate ``g`` in [0, 1] per axis from what
    contact depends on (normalised features). An object the hand does not hold or push cannot drift, however
    long the rollout; a held one goes where the hand goes (a lift included), in step with the hand the dynamics
    predict. The gate is fitted to the share each real step shows (``fit_mover``)."""

    def __init__(self, features: int):
        super().__init__()
        self.gate = _mlp(features, 3)

    def forward(self, features: Tensor, hand_change: Tensor) -> Tensor:
        return torch.sigmoid(self.gate(features)) * hand_change


class MatrixMover(nn.Module):
    """The object's change as a linear map of the hand's: ``M @ d_hand``, the 3x3 map ``M`` from what contact
    depends on and the object's offset from the goal (normalised features). A gate per axis (``CarryMover``) can only
    scale the hand's change; a map can also turn it. A door's handle goes along the hinge's arc, whatever way the
    hand pulls, and the arc's tangent turns as the door opens: the offset from the goal says how far it has. Left
    alone, a map near 0 keeps an untouched object still, and the identity carries a held one. Fitted by least
    squares on real steps (``fit_mover``); its last layer starts at 0, so an unfitted mover moves nothing."""

    def __init__(self, features: int):
        super().__init__()
        self.map = _mlp(features, 9)
        nn.init.zeros_(self.map[-1].weight)
        nn.init.zeros_(self.map[-1].bias)

    def forward(self, features: Tensor, hand_change: Tensor) -> Tensor:
        return (self.map(features).view(-1, 3, 3) @ hand_change.unsqueeze(2)).squeeze(2)


def share_loss(logits: Tensor, share: Tensor) -> Tensor:
    """Cross-entropy of the gate against the share of the hand's change the object took, over the axes where
    the hand moved enough to tell (the others are NaN)."""
    known = ~share.isnan()
    return F.binary_cross_entropy_with_logits(logits[known], share[known])


class ObjectReader(nn.Module):
    """A frame ``[N, 3, S, S]`` -> where the object and the goal are (``OBJECT_DIM``, in units of their spread over
    the data: ``norm``). Trained on real frames against the simulator's positions; an imagined episode reads its
    start frame once, and the dynamics carry the positions from there."""

    def __init__(self, size: int, channels: int = 32):
        super().__init__()
        c, s8 = channels, size // 8
        self.net = nn.Sequential(nn.Conv2d(3, c, 4, 2, 1), nn.SiLU(), nn.Conv2d(c, 2 * c, 4, 2, 1), nn.SiLU(),
                                 nn.Conv2d(2 * c, 2 * c, 4, 2, 1), nn.SiLU(), nn.Flatten(),
                                 nn.Linear(2 * c * s8 * s8, 256), nn.SiLU(), nn.Linear(256, OBJECT_DIM))
        self.norm = Normalizer(OBJECT_DIM)

    def forward(self, frames: Tensor) -> Tensor:
        """Normalised positions (what the loss compares)."""
        return self.net(frames)

    @torch.no_grad()
    def read(self, frames: Tensor, batch: int = 1024) -> Tensor:
        """Positions in metres ``[N, OBJECT_DIM]``."""
        return torch.cat([self.norm.inverse(self(frames[i:i + batch])) for i in range(0, len(frames), batch)])


class VideoWorldModel(WorldModel):
    checkpoint_format = CHECKPOINT_FORMAT
    config_class = VideoConfig
    fits_on_episodes = True
    has_aleatoric = True

    def __init__(self, obs_dim: int, act_dim: int, cfg: VideoConfig | None = None, task: str | None = None):
        super().__init__()
        self.cfg = cfg = (cfg or VideoConfig()).validate()
        self.size = image_size_of(obs_dim)
        L = cfg.latent
        self.spec = ModelSpec(obs_dim, act_dim, members=cfg.members, context_length=2, task=task)
        self.ae = FrameAutoencoder(self.size, L, cfg.channels, reference=cfg.reference == "first")
        # the latent state: [z_t, z_{t-1}, x_t], x the proprioception (and, with objects, the object and goal)
        self.extra = PROPRIO + (OBJECT_DIM if cfg.objects else 0)
        self.dynamics = GaussianEnsemble(2 * L + self.extra, act_dim, EnsembleConfig(
            members=cfg.members, elites=cfg.elites, hidden=tuple(cfg.hidden),
            weight_decay=(2.5e-5,) * (len(cfg.hidden) + 1), max_epochs=cfg.max_epochs, patience=cfg.patience,
            holdout_ratio=cfg.holdout_ratio, fit_precision=cfg.precision), task=None,
            terminated=lambda o: torch.zeros(len(o), dtype=torch.bool, device=o.device))
        self.inverse = _mlp(2 * L, act_dim)
        self.success_head = _mlp(L + PROPRIO, 1)
        self.judge = SuccessJudge(self.size)
        if cfg.objects:
            self.reader = ObjectReader(self.size)
            self._make_success_head()
            if cfg.object_mover:
                self._make_object_mover()
            if cfg.hand_mover:
                self._make_hand_mover()
        self.latent_norm = Normalizer(L)
        # the box the data's x (proprioception, positions) fill: imagined x stays inside it (MetaWorld clips the
        # hand to its workspace; a model left alone walks it out, where no head has seen anything)
        self.register_buffer("x_low", torch.full((self.extra,), -math.inf))
        self.register_buffer("x_high", torch.full((self.extra,), math.inf))
        self.register_buffer("elites", torch.arange(cfg.elites))
        self.register_buffer("holdout_mse", torch.full((cfg.members,), float("nan")))

    def over_encoder(self, **changes) -> "VideoWorldModel":
        """A new model with this one's frame autoencoder and judge and other settings (``changes`` to the
        config, e.g. ``objects=True``): what is left to fit is ``fit_latent``, the part after the
        autoencoder. Dynamics variants compare over one encoder this way, at a fraction of a whole fit."""
        from dataclasses import replace

        new = VideoWorldModel(self.spec.obs_dim, self.spec.act_dim, replace(self.cfg, **changes), task=self.spec.task)
        new.ae.load_state_dict(self.ae.state_dict())
        new.judge.load_state_dict(self.judge.state_dict())
        return new

    # ----------------------------------------------------------------- latents
    @torch.no_grad()
    def encode_obs(self, obs: Tensor, ref: Tensor | None = None, batch: int = 1024) -> Tensor:
        """Observations -> latents, relative to reference frames ``ref`` ``[N, 3, S, S]`` (None: each frame
        its own reference)."""
        frames = obs_to_frames(obs, self.size)
        ref = frames if ref is None else ref
        return torch.cat([self.ae.encode(frames[i:i + batch], ref[i:i + batch]) for i in range(0, len(obs), batch)])

    @torch.no_grad()
    def encode_images(self, images: np.ndarray, batch: int = 512) -> Tensor:
        """An episode's uint8 frames ``[N, S, S, 3]`` -> latents ``[N, latent]`` (what the fit encodes), relative
        to its first frame."""
        ref = chw(images[:1])
        return torch.cat([self.ae.encode(x, ref.expand(len(x), -1, -1, -1))
                          for x in (chw(images[i:i + batch]) for i in range(0, len(images), batch))])

    @torch.no_grad()
    def decode_obs(self, z: Tensor, proprio: Tensor, ref: Tensor | None = None) -> Tensor:
        frames = self.ae.decode(z, ref).permute(0, 2, 3, 1).reshape(len(z), -1)
        return torch.cat([frames, proprio], dim=1)

    def _latent_state(self, z: Tensor, z_prev: Tensor, x: Tensor) -> Tensor:
        return torch.cat([z, z_prev, x], dim=1)

    def _extra_of(self, obs: Tensor) -> Tensor:
        """``x`` of observations: their proprioception, and with ``objects`` the positions the reader sees."""
        proprio = obs[:, -PROPRIO:]
        if not self.cfg.objects:
            return proprio
        return torch.cat([proprio, self.reader.read(obs_to_frames(obs, self.size))], 1)

    def episode_extra(self, episode) -> Tensor:
        """``x`` along a recorded episode ``[T+1, extra]``: its proprioception, and with ``objects`` the
        simulator's object and goal positions (refused, naming the fix, where the file has none)."""
        states = torch.from_numpy(episode.states).float()
        if not self.cfg.objects:
            return states
        if episode.objects is None:
            raise ReverieError(f"world_model.objects=true: episode seed {episode.seed} has no privileged/objects "
                               "(datasets made before they were recorded); make the dataset again")
        return torch.cat([states, torch.from_numpy(episode.objects).float()], 1)

    def _make_success_head(self) -> None:
        width = SUCCESS_RELATION if self.cfg.success_inputs == "relation" else PROPRIO + OBJECT_DIM
        self.object_success = _mlp(width, 1)
        self.object_input_norm = Normalizer(width)

    def _make_hand_mover(self) -> None:
        width = 3 + 1 + self.spec.act_dim + 3
        self.hand_net = nn.ModuleList(_mlp(width, PROPRIO) for _ in range(self.cfg.hand_members))
        self.hand_in = Normalizer(width)
        self.hand_out = Normalizer(PROPRIO)

    def hand_input(self, x: Tensor, action: Tensor) -> Tensor:
        """What the hand's motion depends on: the hand relative to the object, the gripper, the action, and the
        object relative to the goal (how far a drawer or door has come, and so how hard it pulls back)."""
        obj, goal = x[:, PROPRIO:PROPRIO + 3], x[:, PROPRIO + 3:PROPRIO + 6]
        return torch.cat([x[:, :3] - obj, x[:, 3:4], action, obj - goal], 1)

    def hand_move(self, x: Tensor, action: Tensor) -> Tensor:
        """The proprioception's predicted change ``[N, PROPRIO]`` for states ``x`` and actions: the hand movers'
        mean."""
        return self.hand_out.inverse(self._hand_mean(self.hand_in(self.hand_input(x, action))))

    def _hand_mean(self, inp: Tensor) -> Tensor:
        """The hand movers' mean on normalised inputs, in normalised units."""
        return torch.stack([net(inp) for net in self.hand_net]).mean(0)

    def fit_hand(self, episodes, generator: torch.Generator, xs: list[Tensor] | None = None) -> float:
        """The hand movers on real transitions (``xs``: their ``episode_extra``, if at hand), one after another:
        each one step at a time, then (``hand_horizon`` > 1) on open-loop unrolls (``_unroll_hand``). Returns
        their mean's final one-step mean squared error in units of the change's spread."""
        xs = xs if xs is not None else [self.episode_extra(e) for e in episodes]
        actions = [torch.from_numpy(e.actions).float() for e in episodes]
        inp = torch.cat([self.hand_input(x[:-1], a) for a, x in zip(actions, xs)])
        out = torch.cat([x[1:, :PROPRIO] - x[:-1, :PROPRIO] for x in xs])
        self.hand_in.fit(inp)
        self.hand_out.fit(out)
        inp, out = self.hand_in(inp), self.hand_out(out)
        horizon = min(self.cfg.hand_horizon, max(len(a) for a in actions))
        if horizon > 1:                 # every window of that many steps: x [H+1, N, extra], actions [H, N, act]
            X = torch.cat([x.unfold(0, horizon + 1, 1) for x in xs if len(x) > horizon]).permute(2, 0, 1)
            A = torch.cat([a.unfold(0, horizon, 1) for a in actions if len(a) >= horizon]).permute(2, 0, 1)
        with torch.enable_grad():
            for net in self.hand_net:
                self._train_head(net, inp, out, F.mse_loss, generator)
                if horizon > 1:
                    self._unroll_hand(net, X, A, generator)
        with torch.no_grad():
            return float(F.mse_loss(self._hand_mean(inp), out))

    def _unroll_hand(self, net: nn.Module, X: Tensor, A: Tensor, generator: torch.Generator) -> None:
        """Fine-tune one hand mover on open-loop unrolls: from each window's first real state, the hand moves by
        the mover's own predictions for the window's real actions, the objects where they really were; the loss
        is the hand's error after every step, in units of one step's spread. A one-step fit is never shown its own
        errors fed back, and learns a short stride of MetaWorld's hand, which lags its target."""
        opt = torch.optim.Adam(net.parameters(), lr=3e-4)
        for _ in range(self.cfg.hand_unroll_updates):
            idx = torch.randint(X.shape[1], (256,), generator=generator)
            x, a = X[:, idx], A[:, idx]
            hand, loss = x[0, :, :PROPRIO], 0.0
            for s in range(len(a)):
                now = torch.cat([hand, x[s, :, PROPRIO:]], 1)
                hand = hand + self.hand_out.inverse(net(self.hand_in(self.hand_input(now, a[s]))))
                loss = loss + ((hand - x[s + 1, :, :PROPRIO]) / self.hand_out.std).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            (loss / len(a)).backward()
            opt.step()

    def add_hand_mover(self, episodes, generator: torch.Generator, **settings) -> float:
        """Turn ``hand_mover`` on in a fitted model with objects, or fit its hand movers again (``settings``: any
        of ``hand_members``, ``hand_horizon``, ``hand_unroll_updates``; otherwise the config's), on real
        ``episodes`` (the rest of the model as it is). Returns ``fit_hand``'s error."""
        from dataclasses import replace

        unknown = set(settings) - {"hand_members", "hand_horizon", "hand_unroll_updates"}
        if unknown:
            raise ReverieError(f"add_hand_mover: unknown setting {', '.join(sorted(unknown))}")
        self.cfg = replace(self.cfg, hand_mover=True, **settings).validate()
        self._make_hand_mover()
        return self.fit_hand(episodes, generator)

    def _make_object_mover(self) -> None:
        width = 3 + 1 + self.spec.act_dim + (3 if self.cfg.mover == "matrix" else 0)
        forms = {"carry": CarryMover, "matrix": MatrixMover}
        self.mover = forms[self.cfg.mover](width) if self.cfg.mover in forms else _mlp(width, 3)
        self.mover_in = Normalizer(width)
        self.mover_out = Normalizer(3)

    def add_object_mover(self, episodes, generator: torch.Generator, mover: str) -> float:
        """Give a fitted model with objects the object mover of form ``mover`` (in place of any it has) and fit it
        on real ``episodes`` (seconds; the rest of the model as it is). Returns ``fit_mover``'s error."""
        from dataclasses import replace

        self.cfg = replace(self.cfg, object_mover=True, mover=mover).validate()
        self._make_object_mover()
        return self.fit_mover(episodes, generator)

    def mover_input(self, x: Tensor, action: Tensor) -> Tensor:
        """What the object's motion may depend on: the hand relative to the object, the gripper, the action; for
        the matrix mover also the object relative to the goal (how far a door or drawer has come)."""
        obj = x[:, PROPRIO:PROPRIO + 3]
        parts = [x[:, :3] - obj, x[:, 3:4], action]
        if self.cfg.mover == "matrix":
            parts.append(obj - x[:, PROPRIO + 3:PROPRIO + 6])
        return torch.cat(parts, 1)

    def object_move(self, x: Tensor, action: Tensor, hand_change: Tensor) -> Tensor:
        """The object's predicted change of position ``[N, 3]`` (metres) for states ``x``, actions, and the hand's
        change over the same step (what the carry mover shares out and the matrix mover maps)."""
        features = self.mover_in(self.mover_input(x, action))
        if self.cfg.mover in ("carry", "matrix"):
            return self.mover(features, hand_change)
        return self.mover_out.inverse(self.mover(features))

    def fit_mover(self, episodes, generator: torch.Generator, xs: list[Tensor] | None = None) -> float:
        """The object mover on real transitions (``xs``: their ``episode_extra``, if already at hand); returns its
        final mean squared error, in units of the object's change (free), or of the hand's (carry, matrix)."""
        xs = xs if xs is not None else [self.episode_extra(e) for e in episodes]
        inp = torch.cat([self.mover_input(x[:-1], torch.from_numpy(e.actions)) for e, x in zip(episodes, xs)])
        out = torch.cat([x[1:, PROPRIO:PROPRIO + 3] - x[:-1, PROPRIO:PROPRIO + 3] for x in xs])
        self.mover_in.fit(inp)
        self.mover_out.fit(out)
        features = self.mover_in(inp)
        if self.cfg.mover == "free":
            with torch.enable_grad():
                return self._train_head(self.mover, features, self.mover_out(out), F.mse_loss, generator)
        hand = torch.cat([x[1:, :3] - x[:-1, :3] for x in xs])
        with torch.enable_grad():
            if self.cfg.mover == "carry":   # the gate learns which share of the real hand's change the object took
                moved = hand.abs() > CARRY_MIN_MOVE
                share = torch.where(moved, (out / hand.where(moved, torch.ones_like(hand))).clamp(0, 1),
                                    float("nan"))
                self._train_head(self.mover.gate, features, share, share_loss, generator)
            else:                           # matrix: least squares in units of the hand's change (the map has none)
                scale = hand.pow(2).mean().sqrt().clamp_min(1e-9)
                self._train_head(self.mover, torch.cat([features, hand / scale], 1), out / scale, F.mse_loss,
                                 generator, forward=lambda packed: self.mover(packed[:, :-3], packed[:, -3:]))
        with torch.no_grad():
            return float((self.mover(features, hand) - out).pow(2).mean() / hand.pow(2).mean())

    def success_features(self, x: Tensor) -> Tensor:
        """What the head on positions reads of ``x`` = proprioception, object and goal positions: with
        ``success_inputs=relation`` the object's offset from the goal, its length and the goal (which says
        the task, and so the distance that counts); with ``state``, ``x`` itself."""
        if self.cfg.success_inputs == "state":
            return x
        obj, goal = x[:, PROPRIO:PROPRIO + 3], x[:, PROPRIO + 3:PROPRIO + 6]
        return torch.cat([obj - goal, (obj - goal).norm(dim=1, keepdim=True), goal], 1)

    def objects_success(self, x: Tensor) -> Tensor:
        """Success probability ``[N]`` from ``x`` = proprioception, object and goal positions."""
        return torch.sigmoid(self.object_success(self.object_input_norm(self.success_features(x)))).squeeze(1)

    # ---------------------------------------------------------------- contract
    def init_state(self, start: Tensor, generator: torch.Generator | None = None, member: Tensor | None = None,
                   context: Tensor | None = None) -> dict:
        """``context``: the observation before ``start`` (its frame sets the motion); None repeats ``start``."""
        self.check_start(start, member)
        first = obs_to_frames(start, self.size)           # the reference frame, and the judge's view of the scene
        z = self.encode_obs(start, first)
        z_prev = self.encode_obs(context, first) if context is not None else z
        return {"latent": self._latent_state(z, z_prev, self._extra_of(start)), "member": member, "first": first}

    @torch.no_grad()
    def step(self, state: dict, action: Tensor, *, generator: torch.Generator | None = None,
             deterministic: bool = False) -> tuple[dict, StepOut]:
        check_batch("action", action, self.spec.act_dim, state["latent"].shape[0])
        L = self.cfg.latent
        lat = state["latent"]
        _, out = self.dynamics.step({"obs": lat, "member": state["member"]}, action, generator=generator,
                                    deterministic=deterministic)
        x = out.obs[:, 2 * L:].clamp(self.x_low, self.x_high)      # within the box the data fill
        x_now = lat[:, 2 * L:]
        if self.cfg.hand_mover:                             # the hand follows the action, slowed by what it holds
            hand = x_now[:, :PROPRIO] + self.hand_move(x_now, action)
            x = torch.cat([hand, x[:, PROPRIO:]], 1).clamp(self.x_low, self.x_high)
        if self.cfg.objects and self.cfg.object_mover:      # the object moves by contact; the goal stays
            obj = x_now[:, PROPRIO:PROPRIO + 3] + self.object_move(x_now, action, x[:, :3] - x_now[:, :3])
            x = torch.cat([x[:, :PROPRIO], obj, x_now[:, PROPRIO + 3:]], 1)
            x = x.clamp(self.x_low, self.x_high)
        z_next = out.obs[:, :L]
        proprio = x[:, :PROPRIO]
        next_lat = self._latent_state(z_next, lat[:, :L], x)              # the context slides by one frame
        obs = self.decode_obs(z_next, proprio, state["first"])
        if self.cfg.uncertainty == "inverse_dynamics":
            uncertainty = self.action_error(lat[:, :L], z_next, action)
        else:
            uncertainty = out.uncertainty
        if self.cfg.success_on == "judge":            # the frame shown, beside the episode's first
            success = self.judge.probability(state["first"], obs_to_frames(obs, self.size))
        elif self.cfg.success_on == "objects":
            success = self.objects_success(x)
        else:       # the head on the predicted latent, or on the latent of the frame it decodes to
            success = self.success_probability(self.encode_obs(obs, state["first"]) if self.cfg.success_on == "frame"
                                               else z_next, proprio)
        return {**state, "latent": next_lat}, StepOut(
            obs, out.reward, torch.zeros_like(out.reward, dtype=torch.bool), uncertainty,
            members=out.members, success=success)            # members: the latent ensemble's, for penalties

    @torch.no_grad()
    def success_hold(self) -> int:
        """Steps in a row the success signal must pass the threshold for an imagined success: the judge's
        choice on held-out real episodes (1, some step, for the success head)."""
        return int(self.judge.hold) if self.cfg.success_on == "judge" else 1

    def success_probability(self, z: Tensor, proprio: Tensor) -> Tensor:
        """The success head's probability ``[N]`` for frame latents ``z`` and proprioception: what every imagined
        step reports, and what a probe applies to the latents of real frames."""
        return torch.sigmoid(self.success_head(torch.cat([self.latent_norm(z), proprio], 1))).squeeze(1)

    def action_error(self, z: Tensor, z_next: Tensor, action: Tensor) -> Tensor:
        """How far the inverse model's reading of ``z -> z_next`` is from the action taken."""
        guess = self.inverse(torch.cat([self.latent_norm(z), self.latent_norm(z_next)], 1))
        return (guess - action).norm(dim=1)

    @torch.no_grad()
    def predict(self, obs: Tensor, act: Tensor) -> tuple[Tensor, Tensor]:
        """Every member's next observation (decoded) and reward, ``[E, B, obs_dim + 1]``; the std is the
        latent ensemble's, carried to the frame only as zeros (pixels have no predicted spread)."""
        L = self.cfg.latent
        ref = obs_to_frames(obs, self.size)                          # each row its own reference frame
        z = self.encode_obs(obs, ref)
        mean, _ = self.dynamics.predict(self._latent_state(z, z, self._extra_of(obs)), act)
        frames = torch.stack([self.decode_obs(m[:, :L], m[:, 2 * L:2 * L + PROPRIO], ref) for m in mean])
        out = torch.cat([frames, mean[..., -1:]], dim=-1)
        return out, torch.zeros_like(out)

    # --------------------------------------------------------------------- fit
    def fit_episodes(self, episodes, generator: torch.Generator, progress=None,
                     checkpoint: str | Path | None = None) -> dict[str, float]:
        """Autoencoder, then latent dynamics (with noised context), then the inverse and success heads,
        then the success judge, on a manipulation dataset's episodes (``envs.manipulation_data.Episode``).

        ``checkpoint``: a folder where the autoencoder and the dynamics write their progress after every
        epoch; a fit of the same data, config and seed that finds it continues from there and ends with the
        weights of one that never stopped (an hour's fit on two cores can span sessions)."""
        self._check_frame_size(episodes)
        self.check_success_inputs()
        metrics = {"reconstruction_mse": self.fit_autoencoder(
                       episodes, generator, progress, checkpoint=Path(checkpoint) / "autoencoder.pt" if checkpoint
                       else None),
                   **self.fit_latent(episodes, generator, progress,
                                     checkpoint=Path(checkpoint) / "dynamics.pt" if checkpoint else None)}
        if self.cfg.success_on == "judge":
            metrics.update(self.fit_judge(episodes, generator, progress))
        return metrics

    def fit_autoencoder(self, episodes, generator: torch.Generator, progress=None,
                        checkpoint: str | Path | None = None) -> float:
        """The frame autoencoder, ``ae_epochs`` epochs over the episodes' frames (5% held out), each frame
        encoded beside its reference; progress written to the file ``checkpoint`` after every epoch. Returns the
        held-out reconstruction error (mean squared, pixels in [0, 1])."""
        cfg = self.cfg
        frames = torch.cat([torch.from_numpy(e.images) for e in episodes])               # uint8 [N, S, S, 3]
        n = len(frames)
        first = first_frame_index(episodes)     # the reference of every latent the dynamics see
        perm = torch.randperm(n, generator=generator)
        n_hold = max(1, int(n * 0.05))
        hold, train = perm[:n_hold], perm[n_hold:]

        def batch_frames(idx: Tensor) -> Tensor:
            return chw(frames[idx])

        def references(idx: Tensor) -> Tensor:
            """The first frame of each frame's episode, or (half the time) an earlier frame of it, uniformly:
            an imagined episode may start anywhere (the open-loop replays start mid-episode)."""
            earlier = first[idx] + (torch.rand(len(idx), generator=generator) * (idx - first[idx] + 1)).long()
            return batch_frames(torch.where(torch.rand(len(idx), generator=generator) < 0.5, first[idx], earlier))

        self.ae.mean_frame.copy_(torch.stack([batch_frames(train[i:i + 1024]).sum(0)
                                              for i in range(0, len(train), 1024)]).sum(0) / len(train))

        # Most pixels never move (a fixed camera on a fixed scene): unweighted, the reconstruction sits on
        # the mean frame for thousands of steps; weighting pixels by how much they vary gets it moving.
        spread = torch.stack([(batch_frames(train[i:i + 1024]) - self.ae.mean_frame).pow(2).sum(0)
                              for i in range(0, len(train), 1024)]).sum(0).div(len(train)).sqrt().mean(0)
        weight = 1.0 + cfg.motion_weight * spread / spread.mean().clamp_min(1e-8)
        # bfloat16: the convolutions' and matmuls' arithmetic under autocast, the weights, the loss and Adam in
        # float32; channels-last memory is what oneDNN's bfloat16 convolutions want (tests/bench/bench_video.py)
        precision = resolve_precision(cfg.precision)
        memory = torch.channels_last if precision == "bfloat16" else torch.contiguous_format
        self.ae.to(memory_format=memory)
        opt = torch.optim.Adam(self.ae.parameters(), lr=cfg.ae_lr)
        saving = FitCheckpoint(checkpoint, n, cfg, generator)
        saved = saving.resume(self.ae, opt, generator, "cpu")
        start, recon = (saved["epoch"] + 1, saved["recon"]) if saved else (1, float("nan"))
        for epoch in range(start, cfg.ae_epochs + 1):
            order = train[torch.randperm(len(train), generator=generator)]
            for b in range(0, len(order), cfg.ae_batch):
                idx = order[b:b + cfg.ae_batch]
                x, ref = (f.contiguous(memory_format=memory) for f in (batch_frames(idx), references(idx)))
                with update_precision(precision):
                    shown = self.ae.decode(self.ae.encode(x, ref), ref)
                loss = ((shown.float() - x).pow(2) * weight).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            with torch.no_grad():
                x, ref = batch_frames(hold), batch_frames(first[hold])
                recon = F.mse_loss(self.ae.decode(self.ae.encode(x, ref), ref), x).item()
            saving.write(self.ae, opt, generator, epoch=epoch, recon=recon)
            if progress:
                progress("autoencoder", epoch, recon)
        self.ae.to(memory_format=torch.contiguous_format)      # the rest of the fit and every rollout: float32
        return recon

    def fit_judge(self, episodes, generator: torch.Generator, progress=None) -> dict[str, float]:
        """The success judge on real episodes, half its frames seen through this model's autoencoder (as
        imagined frames are); returns its held-out rates, prefixed ``judge_``."""
        self._check_frame_size(episodes)
        hold, train = split_episodes(episodes, 0.2, generator)
        with torch.enable_grad():
            fit_judge(self.judge, train, generator, steps=self.cfg.judge_steps, view=self.reconstruct,
                      progress=progress)
        rates = judge_rates(self.judge, hold, view=self.reconstruct, holds=HOLDS)
        self.judge.hold.fill_(choose_hold(rates, "_shown"))      # imagined frames are the model's own
        return {**{f"judge_{k}": v for k, v in rates.items()}, "judge_hold": float(self.judge.hold)}

    def _check_frame_size(self, episodes) -> None:
        S = self.size
        bad = next((e.images.shape[1:] for e in episodes if e.images.shape[1:] != (S, S, 3)), None)
        if bad is not None:
            raise ReverieError(f"frames of size {list(bad)}: this video model takes [{S}, {S}, 3]")

    @torch.no_grad()
    def reconstruct(self, frames: Tensor, first: Tensor) -> Tensor:
        """Frames ``[N, 3, S, S]`` as the model shows them: encoded and decoded, relative to their episodes' first
        frames ``first``."""
        return self.ae.decode(self.ae.encode(frames, first), first)

    def fit_latent(self, episodes, generator: torch.Generator, progress=None,
                   checkpoint: str | Path | None = None) -> dict[str, float]:
        """Everything after the autoencoder: latent dynamics (with noised context; then, with
        ``unroll_steps``, on their own predictions), inverse dynamics and success heads. On its own, it
        refits a model's dynamics on other episodes (more varied actions) over the same frame encoder."""
        cfg = self.cfg
        self.check_success_inputs()
        zs = [self.encode_images(e.images) for e in episodes]              # latents of every frame, by episode
        all_z = torch.cat(zs)
        self.latent_norm.fit(all_z)
        spread = self.latent_norm.std

        xs = [self.episode_extra(e) for e in episodes]                      # proprioception (and objects)
        self.x_low.copy_(torch.cat(xs).min(0).values)
        self.x_high.copy_(torch.cat(xs).max(0).values)
        # the object reader reads positions off a start frame, not exactly: the noised copy of the data moves
        # them by as much as it moves the latents, in units of their spread
        x_spread = torch.cat(xs).std(0).clamp_min(1e-6)
        x_spread[:PROPRIO] = 0                                        # the proprioception is read exactly
        obs, act, nxt, rew = [], [], [], []
        for e, z, p in zip(episodes, zs, xs):
            prev = torch.cat([z[:1], z[:-2]])                        # z_{t-1} for t = 0..T-1 (z_0 repeated)
            for copy in range(2):                                     # the clean data and one noised copy
                noise = cfg.context_noise * spread * torch.randn(z[:-1].shape, generator=generator) if copy else 0
                noise_prev = cfg.context_noise * spread * torch.randn(prev.shape, generator=generator) if copy else 0
                noise_x = cfg.context_noise * x_spread * torch.randn(p[:-1].shape, generator=generator) if copy else 0
                obs.append(self._latent_state(z[:-1] + noise, prev + noise_prev, p[:-1] + noise_x))
                nxt.append(self._latent_state(z[1:], z[:-1], p[1:]))
                act.append(torch.from_numpy(e.actions))
                rew.append(torch.from_numpy(e.rewards))
        metrics = self.dynamics.fit(torch.cat(obs), torch.cat(act), torch.cat(nxt), torch.cat(rew), generator,
                                    checkpoint=checkpoint,
                                    progress=(lambda ep, mse: progress("dynamics", ep, mse.mean().item()))
                                    if progress else None)
        self.elites.copy_(self.dynamics.elites)
        self.holdout_mse.copy_(self.dynamics.holdout_mse)
        if cfg.unroll_steps > 0 and cfg.unroll_epochs > 0:
            metrics.update(self.train_unrolled(episodes, cfg.unroll_steps, cfg.unroll_epochs, generator,
                                               lr=cfg.unroll_lr, progress=progress, latents=zs))

        # inverse dynamics on real latent pairs; success on real frames
        zt = torch.cat([z[:-1] for z in zs])
        zn = torch.cat([z[1:] for z in zs])
        a = torch.cat([torch.from_numpy(e.actions) for e in episodes])
        s_in = torch.cat([torch.cat([z[1:], torch.from_numpy(e.states[1:])], 1) for e, z in zip(episodes, zs)])
        s_lab = torch.cat([torch.from_numpy(e.success).float() for e in episodes])
        inv_loss = self._train_head(self.inverse, torch.cat([self.latent_norm(zt), self.latent_norm(zn)], 1), a,
                                    F.mse_loss, generator)
        s_in = torch.cat([self.latent_norm(s_in[:, :cfg.latent]), s_in[:, cfg.latent:]], 1)
        suc_loss = self._train_head(self.success_head, s_in, s_lab[:, None],
                                    F.binary_cross_entropy_with_logits, generator)
        metrics.update({"inverse_dynamics_mse": inv_loss, "success_bce": suc_loss})
        if cfg.objects:
            metrics.update(self.fit_objects(episodes, xs, generator, progress))
        if cfg.objects and cfg.object_mover:
            metrics["object_mover_mse"] = self.fit_mover(episodes, generator, xs)
        if cfg.hand_mover:
            metrics["hand_mover_mse"] = self.fit_hand(episodes, generator, xs)
        return metrics

    def fit_objects(self, episodes, xs: list[Tensor], generator: torch.Generator, progress=None) -> dict[str, float]:
        """The object reader on real frames, and the success head on the proprioception and the positions, both on
        80% of the episodes; returns the reader's mean error on the other episodes' start frames (metres, object
        and goal) and the head's episode rates there (on the simulator's positions)."""
        hold, train = split_episodes(list(range(len(episodes))), 0.2, generator)
        hold = hold or train                  # one episode: measured on what it trained on
        frames = torch.cat([torch.from_numpy(episodes[i].images) for i in train])
        targets = torch.cat([xs[i][:, PROPRIO:] for i in train])
        self.reader.norm.fit(targets)
        y = self.reader.norm(targets)
        opt = torch.optim.Adam(self.reader.parameters(), lr=1e-3)
        with torch.enable_grad():
            for step in range(1, self.cfg.reader_steps + 1):
                idx = torch.randint(len(frames), (64,), generator=generator)
                loss = F.mse_loss(self.reader(chw(frames[idx])), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if progress and step % 500 == 0:
                    progress("object reader", step, loss.item())
        start_frames = chw(torch.cat([torch.from_numpy(episodes[i].images[:1]) for i in hold]))
        miss = self.reader.read(start_frames) - torch.cat([xs[i][:1, PROPRIO:] for i in hold])

        return {"reader_error_object_m": float(miss[:, :3].norm(dim=1).mean()),
                "reader_error_goal_m": float(miss[:, 3:].norm(dim=1).mean()),
                **self.fit_object_success(episodes, xs, train, hold, generator)}

    def refit_object_success(self, episodes, generator: torch.Generator,
                             success_inputs: str | None = None) -> dict[str, float]:
        """The head on positions fitted again on real ``episodes`` (with ``success_inputs`` if given), the rest of
        the model as it is: seconds, against the hour the dynamics take. Returns ``fit_object_success``'s
        figures on a fifth of the episodes held out."""
        from dataclasses import replace

        if not self.cfg.objects:
            raise ReverieError("refitting the success head on positions needs a model with world_model.objects=true")
        if success_inputs is not None and success_inputs != self.cfg.success_inputs:
            self.cfg = replace(self.cfg, success_inputs=success_inputs).validate()
            self._make_success_head()
        xs = [self.episode_extra(e) for e in episodes]                # fit_object_success checks the inputs first
        hold, train = split_episodes(list(range(len(episodes))), 0.2, generator)
        return self.fit_object_success(episodes, xs, train, hold or train, generator)

    def check_success_inputs(self) -> None:
        """Refused before a fit: a head on the object's relation to the goal for a task whose success is the
        hand's (reach)."""
        if not self.cfg.objects or self.cfg.success_inputs != "relation":
            return
        from envs.manipulation import TASKS

        hand = [t for t in (self.spec.task or "").split(",") if t in TASKS and TASKS[t].success_body == "hand"]
        if hand:
            raise ReverieError(f"world_model.success_inputs=relation: the success of {', '.join(hand)} is the "
                               "hand's distance to the goal, which it leaves out; use success_inputs=state")

    def fit_object_success(self, episodes, xs: list[Tensor], train: list[int], hold: list[int],
                           generator: torch.Generator) -> dict[str, float]:
        """The success head on positions, on the ``train`` episodes' real positions and MetaWorld's labels;
        returns its loss and its episode rates on the ``hold`` episodes (a success where it passes 0.5 at some
        step)."""
        self.check_success_inputs()
        x_in = self.success_features(torch.cat([xs[i][1:] for i in train]))
        labels = torch.cat([torch.from_numpy(episodes[i].success).float() for i in train])
        self.object_input_norm.fit(x_in)
        bce = self._train_head(self.object_success, self.object_input_norm(x_in), labels[:, None],
                               F.binary_cross_entropy_with_logits, generator)
        with torch.no_grad():
            said = np.array([bool((self.objects_success(xs[i][1:]) > 0.5).any()) for i in hold])
        truth = np.array([bool(episodes[i].success.any()) for i in hold])
        return {"objects_success_bce": bce,
                "objects_success_tpr": float(said[truth].mean()) if truth.any() else float("nan"),
                "objects_success_fpr": float(said[~truth].mean()) if (~truth).any() else float("nan")}

    def train_unrolled(self, episodes, steps: int, epochs: int, generator: torch.Generator, lr: float = 1e-4,
                       batch: int = 256, progress=None, latents: list[Tensor] | None = None) -> dict[str, float]:
        """Against drift: train every member of the latent dynamics on its own ``steps``-step predictions.

        A one-step fit sees only true context latents; a rollout feeds the model its own. Here each
        member rolls ``steps`` steps from a true latent state along the recorded actions, the context
        sliding as ``step`` slides it, and the error of every predicted latent and proprioception against
        the true one (in units of their spread) is backpropagated through the whole unroll. Members
        train side by side in one batched pass. Returns the held-out unrolled error before and after."""
        L, dyn = self.cfg.latent, self.dynamics
        if latents is None:
            latents = [self.encode_images(e.images) for e in episodes]
        lat0, acts, z_true, p_true = [], [], [], []
        for e, z in zip(episodes, latents):
            T = len(e)
            if T < steps + 1:
                continue
            p = self.episode_extra(e)                                         # proprioception (and objects)
            a = torch.from_numpy(e.actions).float()
            prev = torch.cat([z[:1], z[:-1]])                                  # z_{t-1} (z_0 repeated)
            idx = torch.arange(0, T - steps + 1)                               # windows t .. t + steps
            lat0.append(self._latent_state(z[idx], prev[idx], p[idx]))
            win = idx[:, None] + torch.arange(steps)[None]                    # [W, steps]
            acts.append(a[win])
            z_true.append(z[win + 1])
            p_true.append(p[win + 1])
        if not lat0:
            raise ReverieError(f"world_model.unroll_steps={steps}: no episode is longer than that")
        lat0, acts, z_true, p_true = (torch.cat(x) for x in (lat0, acts, z_true, p_true))
        n = len(lat0)
        perm = torch.randperm(n, generator=generator)
        n_hold = max(1, n // 20)
        hold, train = perm[:n_hold], perm[n_hold:]
        # errors in units of the spread the model was fitted on, not of these episodes' (where a gripper never
        # closed or a goal never moved has none, and its least error would swamp the rest); floored at a millimetre
        z_scale = self.latent_norm.std
        p_scale = dyn.input_norm.std[2 * L:2 * L + self.extra].clamp_min(1e-3)
        # with the object mover, the positions a step shows are the mover's and the goal's, not the dynamics': the
        # unroll carries the real ones along and scores the proprioception alone
        own = self.extra if not (self.cfg.objects and self.cfg.object_mover) else PROPRIO
        own = 0 if self.cfg.hand_mover else own               # the hand mover's, likewise

        def unrolled_error(rows: Tensor) -> Tensor:
            E = self.cfg.members
            lat = lat0[rows].expand(E, -1, -1)                                 # [E, B, 2L + 4]
            loss = lat.new_zeros(())
            for j in range(steps):
                a = acts[rows, j].expand(E, -1, -1)
                mean, _ = dyn._trunk(dyn.input_norm(torch.cat([lat, a], -1)))
                delta = dyn.target_norm.inverse(mean)[..., :-1]
                nxt = lat + delta
                z, p = nxt[..., :L], nxt[..., 2 * L:]
                if own < self.extra:
                    p = torch.cat([p[..., :own], p_true[rows, j, own:].expand(E, -1, -1)], -1)
                loss = loss + ((z - z_true[rows, j]) / z_scale).pow(2).mean()
                if own:
                    loss = loss + ((p[..., :own] - p_true[rows, j, :own]) / p_scale[:own]).pow(2).mean()
                lat = torch.cat([z, lat[..., :L], p], -1)                      # the context slides by one frame
            return loss / steps

        params = [q for name, q in dyn.named_parameters() if not name.endswith("logvar")]
        opt = torch.optim.Adam(params, lr=lr)
        with torch.no_grad():
            before = float(unrolled_error(hold))
        for epoch in range(1, epochs + 1):
            order = train[torch.randperm(len(train), generator=generator)]
            for b in range(0, len(order), batch):
                loss = unrolled_error(order[b:b + batch])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            with torch.no_grad():
                after = float(unrolled_error(hold))
            if progress:
                progress(f"dynamics unrolled {steps} steps", epoch, after)
        return {f"unrolled{steps}_holdout_before": before, f"unrolled{steps}_holdout_after": after}

    def _train_head(self, head: nn.Module, x: Tensor, y: Tensor, loss_fn, generator, forward=None) -> float:
        """``head``'s parameters trained on ``loss_fn(forward(x), y)`` (``forward``: ``head`` itself unless given)."""
        forward = forward or head
        opt = torch.optim.Adam(head.parameters(), lr=1e-3)
        n = len(x)
        for _ in range(self.cfg.head_epochs):
            order = torch.randperm(n, generator=generator)
            for b in range(0, n, 256):
                idx = order[b:b + 256]
                loss = loss_fn(forward(x[idx]), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        with torch.no_grad():
            return float(loss_fn(forward(x), y))

    def sample_members(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return self.dynamics.sample_members(n, generator)

    @classmethod
    def older_defaults(cls) -> dict:
        return {"success_on": "latent",           # before the judge, the head was the success signal
                "reference": "mean",               # and the decoder drew from the data's mean frame
                "success_inputs": "state",         # and the head on positions read them as they are
                "hand_members": 1,                 # and the hand mover was one net
                "hand_horizon": 1}                 # fitted one step at a time

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        # a checkpoint from before the hand movers were several holds its one as hand_net.<layer>.*
        state_dict = {re.sub(r"^hand_net\.(\d+)\.(weight|bias)$", r"hand_net.0.\1.\2", k): v
                      for k, v in state_dict.items()}
        return super().load_state_dict(state_dict, strict, assign)

    def may_lack(self, key: str) -> bool:
        """Checkpoints from before the judge have none (a model that does not use it may load them), judges
        from before the hold was chosen at fit have none (they keep the one-frame verdict), and models from
        before the data's box have none (their imagined x is left unbounded)."""
        return (key.startswith("judge.") and self.cfg.success_on != "judge") or key in ("judge.hold", "x_low", "x_high")

"""A small vision-language-action policy (VLA), in the style of LeRobot's policies.

- Vision: a conv encoder of the 64x64 RGB frame (three stride-2 convolutions).
- Language: a word-level tokenizer whose vocabulary is built here from the task
  templates, and embeddings trained here (mean-pooled): no download, nothing
  pretrained. Words it never saw map to one unknown token.
- Proprioception: the hand position and gripper opening.
- Action head: a chunk of ``chunk`` future actions (k x 4) by L1 regression
  (ACT-style), executed open loop from a queue.

API: ``reset()``, ``select_action(obs)`` (pops the queue; predicts a new chunk
when it is empty), ``predict_action_chunk(obs)``; ``obs`` is a dict with
``image`` (uint8 ``[B, S, S, 3]`` or ``[S, S, 3]``), ``state`` (``[B, 4]``) and
``instruction`` (a string or a list of them).

Training: behaviour cloning on demonstrations (``bc_batches`` yields chunked
targets, masking steps past an episode's end), then fine-tuning on imagined
rollouts in a video world model: filtered BC on the imagined episodes a success
classifier trained on real frames judges successful (``agents/vla_finetune``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from envs.errors import ReverieError

UNK, PAD = "<unk>", "<pad>"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


class Tokenizer:
    """Word-level: the vocabulary of the templates it was built from; unknown words share one id."""

    def __init__(self, vocabulary: list[str]):
        self.vocab = [PAD, UNK] + sorted(set(vocabulary) - {PAD, UNK})
        self.index = {w: i for i, w in enumerate(self.vocab)}

    @classmethod
    def from_texts(cls, texts) -> "Tokenizer":
        return cls([w for t in texts for w in words(t)])

    def __call__(self, texts: list[str], length: int = 12) -> Tensor:
        ids = torch.zeros(len(texts), length, dtype=torch.long)
        for i, t in enumerate(texts):
            toks = [self.index.get(w, 1) for w in words(t)][:length]
            ids[i, :len(toks)] = torch.tensor(toks, dtype=torch.long)
        return ids


@dataclass
class VLAConfig:
    image_size: int = 64
    channels: int = 32
    text_dim: int = 64
    hidden: int = 256
    chunk: int = 8            # k: actions predicted per chunk
    execute: int = 4          # actions of each chunk executed before predicting again
    lr: float = 3e-4
    batch_size: int = 64
    action_noise: float = 0.0  # std of Gaussian noise added to every executed action: a noisier copy of a policy,
                               # for a zoo of graded quality (the noise is drawn from the seed given to reset())

    def validate(self) -> "VLAConfig":
        if self.action_noise < 0:
            raise ReverieError(f"agent.action_noise: expected a std >= 0, got {self.action_noise}")
        if not 1 <= self.execute <= self.chunk:
            raise ReverieError(f"agent.execute: expected 1 <= execute <= chunk ({self.chunk}), got {self.execute}")
        if self.image_size % 8:
            raise ReverieError(f"agent.image_size: expected a multiple of 8, got {self.image_size}")
        return self


class VLAPolicy(nn.Module):
    def __init__(self, cfg: VLAConfig, tokenizer: Tokenizer, act_dim: int = 4, proprio: int = 4):
        super().__init__()
        self.cfg = cfg = cfg.validate()
        self.tokenizer, self.act_dim = tokenizer, act_dim
        c, s8 = cfg.channels, cfg.image_size // 8
        self.vision = nn.Sequential(nn.Conv2d(3, c, 4, 2, 1), nn.SiLU(), nn.Conv2d(c, 2 * c, 4, 2, 1), nn.SiLU(),
                                    nn.Conv2d(2 * c, 2 * c, 4, 2, 1), nn.SiLU(), nn.Flatten(),
                                    nn.Linear(2 * c * s8 * s8, cfg.hidden))
        self.embed = nn.Embedding(len(tokenizer.vocab), cfg.text_dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(cfg.hidden + cfg.text_dim + proprio, cfg.hidden), nn.SiLU(),
                                  nn.Linear(cfg.hidden, cfg.hidden), nn.SiLU(),
                                  nn.Linear(cfg.hidden, cfg.chunk * act_dim))
        self._queue: list[Tensor] = []
        self._noise = torch.Generator().manual_seed(0)

    # ----------------------------------------------------------------- inputs
    def _batch(self, obs: dict) -> tuple[Tensor, Tensor, Tensor]:
        image = torch.as_tensor(obs["image"])
        state = torch.as_tensor(obs["state"]).float()
        text = obs["instruction"]
        if image.ndim == 3:
            image, state, text = image[None], state[None], [text]
        elif isinstance(text, str):
            text = [text] * len(image)
        S = self.cfg.image_size
        if image.shape[1:] != (S, S, 3):
            raise ReverieError(f"image: this policy takes [{S}, {S}, 3] frames, got {list(image.shape[1:])}")
        frames = image.permute(0, 3, 1, 2).float() / 255.0 if image.dtype == torch.uint8 else image.permute(0, 3, 1, 2)
        return frames, state, self.tokenizer(list(text))

    def forward(self, frames: Tensor, state: Tensor, tokens: Tensor) -> Tensor:
        """``[B, chunk, act_dim]`` actions in [-1, 1]."""
        mask = (tokens > 0).float()[..., None]
        text = (self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        x = torch.cat([self.vision(frames), text, state], dim=-1)
        return torch.tanh(self.head(x)).reshape(-1, self.cfg.chunk, self.act_dim)

    # -------------------------------------------------------------------- API
    def reset(self, seed: int | None = None) -> None:
        """Start an episode (a batch of them): empty the action queue; ``seed`` reseeds the action noise."""
        self._queue = []
        if seed is not None:
            self._noise.manual_seed(int(seed))

    @torch.no_grad()
    def predict_action_chunk(self, obs: dict) -> Tensor:
        return self(*self._batch(obs))

    @torch.no_grad()
    def select_action(self, obs: dict) -> Tensor:
        """The next action of the current chunk; a new chunk every ``execute`` steps. ``[B, act_dim]``."""
        if not self._queue:
            chunk = self.predict_action_chunk(obs)
            self._queue = list(chunk[:, :self.cfg.execute].unbind(1))
        action = self._queue.pop(0)
        if self.cfg.action_noise > 0:
            action = (action + self.cfg.action_noise * torch.randn(action.shape, generator=self._noise)).clamp(-1, 1)
        return action

    # --------------------------------------------------------------- training
    def bc_loss(self, frames: Tensor, state: Tensor, tokens: Tensor, target: Tensor, mask: Tensor) -> Tensor:
        """L1 over each chunk's steps that lie inside the episode."""
        err = (self(frames, state, tokens) - target).abs().mean(-1)
        return (err * mask).sum() / mask.sum().clamp_min(1.0)

    def save_blob(self) -> dict:
        return {"format": "reverie.vla/1", "config": dict(vars(self.cfg)), "vocab": self.tokenizer.vocab,
                "state_dict": self.state_dict()}

    @classmethod
    def from_blob(cls, blob: dict) -> "VLAPolicy":
        if blob.get("format") != "reverie.vla/1":
            raise ReverieError("field 'format': expected 'reverie.vla/1'")
        policy = cls(VLAConfig(**blob["config"]), Tokenizer(blob["vocab"][2:]))
        policy.load_state_dict(blob["state_dict"])
        return policy


def noisy_copy(blob: dict, std: float) -> dict:
    """A policy file's blob with Gaussian noise of ``std`` on every executed action (a zoo member of
    lower quality that still acts from pixels, so that it can act in a video world model too)."""
    VLAConfig(**{**blob["config"], "action_noise": std}).validate()
    return {**blob, "config": {**blob["config"], "action_noise": float(std)}}


def chunk_targets(actions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """For every step t of an episode, its next ``k`` actions ``[T, k, A]`` and a mask ``[T, k]`` of the
    ones inside the episode (the rest repeat the last action and do not count)."""
    T = len(actions)
    idx = np.minimum(np.arange(T)[:, None] + np.arange(k)[None], T - 1)
    return actions[idx], (np.arange(T)[:, None] + np.arange(k)[None]) < T


def bc_tensors(episodes, k: int) -> dict[str, Tensor]:
    """Every step of every episode as a training example (frames stay uint8 until batched)."""
    images, states, texts, targets, masks = [], [], [], [], []
    for e in episodes:
        tgt, m = chunk_targets(e.actions, k)
        images.append(torch.from_numpy(e.images[:-1]))
        states.append(torch.from_numpy(e.states[:-1]))
        texts += [e.instruction] * len(e)
        targets.append(torch.from_numpy(tgt))
        masks.append(torch.from_numpy(m))
    return {"images": torch.cat(images), "states": torch.cat(states), "texts": texts,
            "targets": torch.cat(targets).float(), "masks": torch.cat(masks).float()}


def train_bc(policy: VLAPolicy, data: dict[str, Tensor], steps: int, generator: torch.Generator,
             progress=None, snapshot=None, snapshot_steps=()) -> float:
    """Behaviour cloning for ``steps`` gradient steps; returns the last 100 steps' mean loss.
    ``snapshot(step, policy)`` is called at each of ``snapshot_steps`` (a zoo of graded quality)."""
    opt = torch.optim.AdamW(policy.parameters(), lr=policy.cfg.lr, weight_decay=1e-4)
    n = len(data["images"])
    tokens = policy.tokenizer(data["texts"])
    recent: list[float] = []
    for step in range(1, steps + 1):
        idx = torch.randint(0, n, (policy.cfg.batch_size,), generator=generator)
        frames = data["images"][idx].permute(0, 3, 1, 2).float() / 255.0
        loss = policy.bc_loss(frames, data["states"][idx], tokens[idx], data["targets"][idx], data["masks"][idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent = (recent + [loss.item()])[-100:]
        if snapshot is not None and step in snapshot_steps:
            snapshot(step, policy)
        if progress and step % 500 == 0:
            progress(step, float(np.mean(recent)))
    return float(np.mean(recent))


@torch.no_grad()
def real_episodes(policy: VLAPolicy, task: str, seeds: list[int], split: str = "train", image_size: int = 64,
                  max_steps: int | None = None, keep_frames_of: int | None = None):
    """The policy in the real simulator, one episode per seed (ended by success or the step limit), the
    instruction drawn per seed from ``split``: successes ``[n]``, lengths ``[n]``, and the frames of the
    episode of seed ``keep_frames_of`` (empty if none)."""
    from envs.manipulation import ManipulationEnv, instruction

    env = ManipulationEnv(task, image_size, max_episode_steps=max_steps)
    wins, lengths, frames = [], [], []
    for seed in seeds:
        obs = env.reset(seed)
        text = instruction(env.task, np.random.default_rng(seed), split)
        policy.reset(seed)
        seen = [obs["image"]]
        done = False
        for t in range(env.max_episode_steps):
            a = policy.select_action({**obs, "instruction": text})[0].numpy()
            obs, _, _, truncated, info = env.step(a)
            seen.append(obs["image"])
            if info["success"]:
                done = True
                break
            if truncated:
                break
        wins.append(done)
        lengths.append(t + 1)
        if seed == keep_frames_of:
            frames = seen
    env.close()
    return np.array(wins), np.array(lengths), frames


def success_rate(policy: VLAPolicy, task: str, seeds: list[int], split: str = "train", image_size: int = 64,
                 max_steps: int | None = None) -> dict:
    """The policy's real success rate over one episode per seed, with each seed's outcome (``wins``), so that
    two policies measured on the same seeds can be compared pair by pair."""
    wins, lengths, _ = real_episodes(policy, task, seeds, split, image_size, max_steps)
    return {"task": task, "episodes": len(seeds), "success_rate": float(np.mean(wins)),
            "mean_length": float(np.mean(lengths)), "seeds": [int(s) for s in seeds],
            "wins": [bool(w) for w in wins]}

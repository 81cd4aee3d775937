"""The SAC core: log-probabilities, the critic ensemble, state round trips, and that it learns."""

import contextlib
import io
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.networks import FusedAdam, FusedAdamW, frozen
from agents.sac import SAC, CriticEnsemble, GaussianActor, SACConfig


def test_squashed_log_prob_matches_change_of_variables():
    torch.manual_seed(0)
    actor = GaussianActor(3, 1, (16,))
    obs = torch.randn(1, 3).expand(20000, -1)
    act, logp = actor(obs, generator=torch.Generator().manual_seed(0))
    assert ((act > -1) & (act < 1)).all()
    # a histogram density estimate of the squashed action agrees with exp(log_prob)
    hist, edges = np.histogram(act.detach().numpy()[:, 0], bins=40, range=(-1, 1), density=True)
    centers = torch.tensor((edges[:-1] + edges[1:]) / 2, dtype=torch.float32)[:, None]
    mean, log_std = actor.net(obs[:1]).chunk(2, -1)
    pre = torch.atanh(centers.clamp(-0.999, 0.999))
    dens = (torch.exp(-0.5 * ((pre - mean) / log_std.exp()) ** 2) / (log_std.exp() * math.sqrt(2 * math.pi))
            / (1 - centers ** 2))[:, 0]
    mask = hist > 0.05
    np.testing.assert_allclose(hist[mask], dens.detach().numpy()[mask], rtol=0.15)
    # and log_prob is that density at the sampled actions
    a0 = act[:5]
    pre0 = torch.atanh(a0)
    expected = (-0.5 * ((pre0 - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
                - torch.log(1 - a0 ** 2)).sum(-1)
    torch.testing.assert_close(logp[:5], expected, rtol=1e-3, atol=1e-3)


def test_critic_ensemble_members_are_independent():
    critic = CriticEnsemble(4, 2, n=5, hidden=(8,))
    q = critic(torch.randn(7, 4), torch.randn(7, 2))
    assert q.shape == (5, 7) and q.std(0).min() > 0


def test_a_frozen_critic_passes_gradients_to_the_action_only_and_restores_its_flags():
    critic = CriticEnsemble(3, 1, n=2, hidden=(8,))
    first = next(critic.parameters())
    first.requires_grad_(False)                     # a flag set before must come back as it was
    before = [p.requires_grad for p in critic.parameters()]
    act = torch.zeros(4, 1, requires_grad=True)
    with frozen(critic):
        critic(torch.randn(4, 3), act).sum().backward()
    assert act.grad is not None and act.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())
    assert [p.requires_grad for p in critic.parameters()] == before


def test_freezing_the_critic_in_the_actor_step_leaves_every_update_unchanged(monkeypatch):
    def train() -> SAC:
        torch.manual_seed(0)
        agent = SAC(5, 2, SACConfig(hidden=(32, 32), critics=3))
        g = torch.Generator().manual_seed(1)
        for _ in range(20):
            batch = {"obs": torch.randn(64, 5, generator=g), "actions": torch.rand(64, 2, generator=g) * 2 - 1,
                     "rewards": torch.randn(64, generator=g), "next_obs": torch.randn(64, 5, generator=g),
                     "terminated": torch.zeros(64, dtype=torch.bool)}
            agent.update(batch, g)
        return agent

    fast = train()
    monkeypatch.setattr("agents.sac.frozen", contextlib.nullcontext)   # the critic's weight gradients computed
    slow = train()
    for name in ("actor", "critic"):
        for x, y in zip(getattr(fast, name).state_dict().values(), getattr(slow, name).state_dict().values()):
            assert torch.equal(x, y)


@pytest.mark.parametrize("torch_opt, fused_opt, kwargs", [(torch.optim.Adam, FusedAdam, {}),
                                                         (torch.optim.AdamW, FusedAdamW, {"weight_decay": 0.1})])
def test_fused_adam_steps_as_torch_adam_and_takes_over_an_unfused_checkpoint(torch_opt, fused_opt, kwargs):
    """The learners' FusedAdam and the ensemble fit's FusedAdamW (decoupled weight decay)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    twin.load_state_dict(net.state_dict())
    plain, fused = torch_opt(net.parameters(), lr=1e-2, **kwargs), fused_opt(twin.parameters(), lr=1e-2, **kwargs)
    x, y = torch.randn(64, 6), torch.randn(64, 1)
    for _ in range(20):
        for model, opt in ((net, plain), (twin, fused)):
            opt.zero_grad()
            (model(x) - y).pow(2).mean().backward()
            opt.step()
    for p, q in zip(net.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)   # the same algorithm, to rounding
    # a checkpoint from the unfused optimizer keeps its moments and step count, and steps fused from then on
    saved = plain.state_dict()
    assert saved["param_groups"][0]["fused"] is None
    fused.load_state_dict(saved)
    assert all(group["fused"] for group in fused.param_groups)
    assert fused.state_dict()["state"][0]["step"].item() == 20
    torch.testing.assert_close(fused.state_dict()["state"][0]["exp_avg"], saved["state"][0]["exp_avg"])


def test_state_round_trip_continues_identically():
    def batch(g):
        return {"obs": torch.randn(32, 3, generator=g), "actions": torch.rand(32, 1, generator=g) * 2 - 1,
                "rewards": torch.randn(32, generator=g), "next_obs": torch.randn(32, 3, generator=g),
                "terminated": torch.zeros(32, dtype=torch.bool)}
    torch.manual_seed(0)
    a = SAC(3, 1, SACConfig(hidden=(16, 16)))
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        a.update(batch(g), g)
    buf = io.BytesIO()                      # through bytes, as a checkpoint on disk
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = SAC(3, 1, SACConfig(hidden=(16, 16)))
    b.load_state_dict(torch.load(buf, weights_only=True))
    ga, gb = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    for _ in range(3):
        ma, mb = a.update(batch(ga), ga), b.update(batch(gb), gb)
    assert ma == mb


@pytest.mark.slow
def test_sac_learns_pendulum():
    torch.manual_seed(0)
    env = gym.make("Pendulum-v1")
    agent = SAC(3, 1, SACConfig(hidden=(64, 64), actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3))
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    data = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "terminated")}
    obs, _ = env.reset(seed=0)
    returns, ep = [], 0.0
    for step in range(6000):
        if step < 1000:
            a = rng.uniform(-1, 1, 1).astype(np.float32)
        else:
            with torch.no_grad():
                a = agent.actor(torch.from_numpy(obs)[None], generator=g)[0][0].numpy()
        nxt, r, term, trunc, _ = env.step(2.0 * a)
        for k, v in zip(data, (obs, a, np.float32(r / 10), nxt, term)):
            data[k].append(v)
        obs, ep = nxt, ep + r
        if term or trunc:
            returns.append(ep)
            obs, ep = env.reset()[0], 0.0
        if step >= 1000:
            idx = torch.randint(0, len(data["rewards"]), (128,), generator=g).numpy()
            agent.update({k: torch.as_tensor(np.asarray(v)[idx]) for k, v in data.items()}, g)
    assert np.mean(returns[:5]) < -900          # random actions
    assert np.mean(returns[-5:]) > -400, returns[-10:]   # swings up and balances

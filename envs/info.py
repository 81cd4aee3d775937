"""What ``reverie dataset info`` reports about a dataset: size, returns, ranges, coverage."""

from __future__ import annotations

import numpy as np

from envs.dataset import OfflineDataset
from envs.tasks import get_task, normalized_score


def coverage(ds: OfflineDataset) -> float:
    """Differential entropy per dimension (nats) of a Gaussian fitted to the
    (observation, action) pairs: 0.5 * log det(2*pi*e*Cov) / d.

    Raw units, so it compares datasets of one task: a dataset that visits more
    of the state-action space scores higher (random data on hopper is narrow,
    medium-replay wide). It is a summary of spread, not of density holes.
    """
    x = np.concatenate([ds.observations, ds.actions], axis=1).astype(np.float64)
    if len(x) < 2:
        return float("nan")
    cov = np.cov(x, rowvar=False) + 1e-8 * np.eye(x.shape[1])
    _, logdet = np.linalg.slogdet(2 * np.pi * np.e * cov)
    return float(0.5 * logdet / x.shape[1])


def dataset_info(ds: OfflineDataset) -> dict:
    ends = ds.episode_ends()
    lengths = np.diff(np.concatenate([[0], ends]))
    returns = ds.episode_returns()
    complete = bool(ds.terminals[-1] or ds.timeouts[-1])
    if not complete and len(ends) > 1:  # statistics over finished episodes only
        returns, lengths = returns[:-1], lengths[:-1]
    task = get_task(ds.task) if ds.task else None
    return_mean = float(returns.mean())
    pct = np.percentile(returns, [0, 25, 50, 75, 100]).tolist()
    return {
        "name": ds.name,
        "source": ds.source,
        "task": ds.task,
        "transitions": len(ds),
        "episodes": int(len(returns)),
        "unfinished_episode": not complete,
        "terminals": int(ds.terminals.sum()),
        "timeouts": int(ds.timeouts.sum()),
        "episode_length_mean": float(lengths.mean()),
        "return_mean": return_mean,
        "return_std": float(returns.std()),
        "return_percentiles": dict(zip(["min", "p25", "median", "p75", "max"], pct)),
        "normalized_score": float(normalized_score(task, return_mean)) if task else None,
        "normalized_score_std": float(normalized_score(task, returns).std()) if task else None,
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "obs_min": ds.observations.min(axis=0).tolist(),
        "obs_max": ds.observations.max(axis=0).tolist(),
        "action_min": ds.actions.min(axis=0).tolist(),
        "action_max": ds.actions.max(axis=0).tolist(),
        "reward_min": float(ds.rewards.min()),
        "reward_max": float(ds.rewards.max()),
        "has_simulator_states": ds.has_states,
        "continuity_breaks": ds.continuity_breaks(),
        "coverage": coverage(ds),
    }


def format_info(info: dict) -> str:
    def fmt(v, spec=".2f"):
        return "n/a" if v is None else format(v, spec)

    def span(lo, hi):
        return f"[{min(lo):.3g}, {max(hi):.3g}]"

    p = info["return_percentiles"]
    lines = [
        f"dataset      {info['name']}" + (f"  ({info['source']})" if info["source"] and info["source"] != info["name"] else ""),
        f"task         {info['task'] or 'unknown'}",
        f"transitions  {info['transitions']:,}",
        f"episodes     {info['episodes']:,}" + ("  (+1 unfinished)" if info["unfinished_episode"] else "")
        + f"  mean length {info['episode_length_mean']:.1f}  terminals {info['terminals']:,}  timeouts {info['timeouts']:,}",
        f"return       mean {info['return_mean']:.1f} ± {info['return_std']:.1f}  "
        f"min {p['min']:.1f}  p25 {p['p25']:.1f}  median {p['median']:.1f}  p75 {p['p75']:.1f}  max {p['max']:.1f}",
        f"normalized   {fmt(info['normalized_score'], '.1f')}"
        + (f" ± {info['normalized_score_std']:.1f}  (D4RL reference scores)" if info["normalized_score"] is not None else "  (task unknown)"),
        f"observations dim {info['obs_dim']}, range {span(info['obs_min'], info['obs_max'])}",
        f"actions      dim {info['act_dim']}, range {span(info['action_min'], info['action_max'])}",
        f"rewards      range [{info['reward_min']:.3g}, {info['reward_max']:.3g}]",
        f"coverage     {info['coverage']:.3f} nats/dim (Gaussian entropy of (obs, action); higher = wider)",
        f"sim states   {'yes (qpos/qvel)' if info['has_simulator_states'] else 'no'}"
        + (f"  continuity breaks {info['continuity_breaks']}" if info["continuity_breaks"] else ""),
    ]
    return "\n".join(lines)

"""MBPO-style SAC on imagined rollouts with no penalty at all (Janner et al., 2019).

The update is SAC's, unchanged (``agents/sac.py``); only the data differs: a
small share of real transitions and the rest from short model rollouts. It is
the ablation the conservative learners are measured against: what happens when
nothing guards against the model's errors.
"""

from __future__ import annotations

from agents.sac import SAC


class MBPO(SAC):
    uses_model = True

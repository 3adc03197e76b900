"""Built-in agents: reference baselines and agent wrappers (ensembling, dual-rate, online critics)."""

from hylo.agents.basic import HoldAgent, RandomAgent, neutral_action
from hylo.agents.critic import Critic, CriticAgent, ProgressCritic
from hylo.agents.dual_rate import Commit, DualRateAgent, Policy, Reasoner
from hylo.agents.temporal_ensemble import TemporalEnsemble

__all__ = [
    "Commit",
    "Critic",
    "CriticAgent",
    "DualRateAgent",
    "HoldAgent",
    "Policy",
    "ProgressCritic",
    "RandomAgent",
    "Reasoner",
    "TemporalEnsemble",
    "neutral_action",
]

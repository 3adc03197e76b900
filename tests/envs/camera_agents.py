"""Agents the tests name as `camera_agents:Class` (in worker processes and `hylo` subprocesses too): they act as
the built-ins do but declare nothing, so they are given the benchmark's whole observation, cameras included."""

from __future__ import annotations

from hylo.agents.basic import RandomAgent


class RandomWithCameras(RandomAgent):
    """`random`'s seeded actions, with every camera the benchmark renders in its observations (the built-in declares
    that it needs none, so nothing is rendered for it)."""

    requirements = None

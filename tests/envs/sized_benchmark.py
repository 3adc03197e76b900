"""A third-party benchmark with an option: BabyAI whose frames are `tile_size` pixels a cell (`-E tile_size=4`)."""

from __future__ import annotations

from hylo.envs.babyai import BabyAIBenchmark, BabyAIEnvironment


class SizedBabyAI(BabyAIBenchmark):
    name = "sized"

    def __init__(self, tile_size: int = 8) -> None:
        self.tile_size = tile_size

    def make_env(self, *, render_images: bool = False) -> BabyAIEnvironment:
        return BabyAIEnvironment(render_images=render_images, tile_size=self.tile_size)

"""A vla-eval model server for the remote-agent tests: vla-eval's own `PredictModelServer`, served by its own
`serve_async` on a free loopback port (printed as `PORT <n>`); each observation is announced as `OBS <step> <json>`, the
json mapping each camera under `images` to its shape and dtype.

    python vlaeval_model_server.py [--value V] [--dim D] [--horizon H] [--delay S] [--port P]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import anyio
import numpy as np
from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.model_servers.serve import serve_async


class ConstantPolicy(PredictModelServer):
    """Answers `value` in every dimension: one action, or a (horizon, dim) chunk; needs `state` in the observation."""

    def __init__(self, value: float, dim: int, horizon: int, delay: float) -> None:
        super().__init__()
        self.value, self.dim, self.horizon, self.delay = value, dim, horizon, delay

    def predict(self, obs: dict[str, Any], ctx: SessionContext) -> dict[str, Any]:
        cameras = {
            name: [list(np.shape(image)), str(np.asarray(image).dtype)] for name, image in obs.get("images", {}).items()
        }
        print(f"OBS {ctx.step} {json.dumps(cameras)}", flush=True)
        if "state" not in obs:
            raise KeyError(f"no state in the observation (keys {sorted(obs)})")
        if self.delay:
            time.sleep(self.delay)
        shape = (self.horizon, self.dim) if self.horizon else (self.dim,)
        return {"actions": np.full(shape, self.value, dtype=np.float32)}

    def get_action_spec(self) -> dict[str, Any]:
        return {}

    def get_observation_spec(self) -> dict[str, Any]:
        return {}


async def main(args: argparse.Namespace) -> None:
    policy = ConstantPolicy(args.value, args.dim, args.horizon, args.delay)
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_async, policy, "127.0.0.1", args.port)
        print(f"PORT {port}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--value", type=float, default=0.5)
    parser.add_argument("--dim", type=int, default=1)
    parser.add_argument("--horizon", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    anyio.run(main, parser.parse_args())

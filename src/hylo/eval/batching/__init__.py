"""Batched policy inference (`hylo eval --workers N --batch B`): one copy of the agent, in a policy-host process,
fed by every env worker.

- `supervisor.PolicyHost` starts the host in the run's process, restarts it when it dies, and reads its figures;
- `host` is the host process: one `EpisodeContext` per running episode, requests gathered by `batcher.Batcher` into
  `act_batch` calls of at most B;
- `proxy.HostedAgent` is what each worker's Kernel holds instead of the agent: its calls, tagged by episode, go to
  the host over a Unix socket;
- `wire` is how both ends frame a message: pickled, with large arrays (camera frames) out of band.

Nothing here imports the workers or the pools (they import it): `hylo.eval.batched` joins a pool to its host.
"""

from hylo.eval.batching.proxy import HostedAgent, HostEndpoint, PolicyHostDied
from hylo.eval.batching.supervisor import BatchFigures, HostFailed, PolicyHost

__all__ = ["BatchFigures", "HostEndpoint", "HostFailed", "HostedAgent", "PolicyHost", "PolicyHostDied"]

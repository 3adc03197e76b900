"""The episode ids of `gym:<id>` benchmarks: `gym/<split>/<short name>/<index>@s<seed>`, and the long form
`gym:<id>/<split>/<id>/<index>@s<seed>` runs were logged under before (kept when such a run resumes, and paired with
the short one by `hylo compare`). A module of its own, free of gymnasium, for the statistics that pair runs."""

from __future__ import annotations


def short_env_name(env_id: str) -> str:
    """A short readable form of a Gymnasium id for episode ids: the `module:` part dropped, lower case, and the
    namespace dropped when the name repeats it (its `gym_` prefix aside), else kept before a dot:
    `gym_pusht/PushT-v0` → `pusht-v0`, `gym_aloha/AlohaInsertion-v0` → `alohainsertion-v0`, `CartPole-v1` →
    `cartpole-v1`, `ALE/Pong-v5` → `ale.pong-v5`."""
    name = env_id.rpartition(":")[2]
    namespace, _, rest = name.rpartition("/")
    rest = rest.lower()
    stem = namespace.lower().removeprefix("gym_").removeprefix("gym-")
    if not namespace or (stem and rest.startswith(stem)):
        return rest
    return f"{namespace.lower()}.{rest}"


def short_episode_id(episode_id: str, task: str) -> str:
    """The id an episode of task `task` has now: a gym episode's id in the long form it had before
    (`gym:<id>/<split>/<id>/<index>@s<seed>`) in the short one (`gym/<split>/<short name>/<index>@s<seed>`); any other
    id as it is."""
    prefix = f"gym:{task}/"
    if not episode_id.startswith(prefix):
        return episode_id
    split, _, rest = episode_id.removeprefix(prefix).partition("/")
    if not split or not rest.startswith(f"{task}/"):
        return episode_id
    return f"gym/{split}/{short_env_name(task)}/{rest.removeprefix(f'{task}/')}"

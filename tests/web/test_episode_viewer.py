"""The episode viewer in a browser against a real `hylo serve`, on real Meta-World runs (the expert on reach-v3, one
episode each): opened from the run page's episode panel, the cursor moved by the keyboard and by the scrubber shows
the step's action and reward as the run's trace holds them, and the video shows that step's frame; under realtime
timing its timeline marks each chunk's dropped stale actions and shades each step the env's hold action ran, as the
trace has them."""

from __future__ import annotations

import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from browser import HyloServe, snap
from playwright.sync_api import Page, expect

from hylo.evallog.logdir import find_run
from hylo.evallog.store import EvalLog

EVAL = "/api/eval/v2"
AT_FRAME = (
    "([frame, fps]) => Math.floor(document.querySelector('[data-testid=viewer-video]').currentTime * fps) === frame"
)
"""Whether the viewer's video shows frame `frame` (it is on screen from frame / fps to (frame + 1) / fps seconds)."""


def get(server: HyloServe, path: str, **params: Any) -> Any:
    response = server.api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def run_done(server: HyloServe, job_id: str, timeout_s: float = 120.0) -> str:
    """The state a job ended in."""
    deadline = time.monotonic() + timeout_s
    while (state := get(server, f"{EVAL}/status/{job_id}")["state"]) in ("queued", "running"):
        assert time.monotonic() < deadline, f"job {job_id} did not end within {timeout_s} s"
        time.sleep(0.2)
    return str(state)


def fixed4(value: float) -> str:
    """As the viewer writes a value: four decimals, halves away from zero (JavaScript's toFixed)."""
    return str(Decimal(value if value != 0 else 0).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def expect_step(page: Page, step: int, total: int, action: list[float], reward: float, fps: float) -> None:
    """The viewer's cursor is at `step`: its action and reward as the trace has them, and the video at its frame
    (frame k shows what step k acted on: frame 0 is the reset's)."""
    expect(page.get_by_test_id("viewer-step")).to_have_text(f"step {step} / {total - 1}")
    expect(page.get_by_test_id("viewer-action-value")).to_have_text([fixed4(v) for v in action])
    expect(page.get_by_test_id("viewer-reward")).to_have_text(fixed4(reward))
    expect(page.get_by_test_id("viewer-cursor")).to_have_attribute("data-step", str(step))
    page.wait_for_function(AT_FRAME, arg=[step, fps])
    expect(page.get_by_test_id("viewer-events")).to_have_attribute("data-step", str(step))
    action_event = page.get_by_test_id("viewer-events").locator('[data-kind="action"]')
    expect(action_event).to_contain_text(f"step={step}")


def recorded_steps(
    server: HyloServe, run_id: str, episode_id: str
) -> tuple[dict[int, Any], dict[int, float], list[Any]]:
    """Each step's action and reward, and the observations in order (the reset's first), as the run's EvalLog holds
    its trace."""
    with EvalLog.open(find_run(server.log_dir, run_id)) as log:
        events = log.trace(episode_id)
    actions = {e["step"]: e["action"] for e in events if e["event"] == "action"}
    rewards = {e["step"]: e["reward"] for e in events if e["event"] == "step.result"}
    return actions, rewards, [e["obs"] for e in events if e["event"] == "observation"]


def test_the_viewer_steps_through_a_metaworld_episode_by_keyboard_and_scrubber(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    run_id = "ui-viewer"
    request = {"benchmark": "metaworld", "agent": "expert", "tasks": ["reach-v3"], "episodes": 1, "video": 1}
    started = server.api.post(f"{EVAL}/start", json={**request, "max_steps": 40, "run_id": run_id})
    assert started.status_code == 200, started.text
    assert run_done(server, started.json()["job_id"]) == "done"
    [episode] = get(server, f"{EVAL}/runs/{run_id}/episodes")["episodes"]
    assert episode["video"], "the episode was recorded"
    actions, rewards, observations = recorded_steps(server, run_id, episode["episode_id"])
    total = episode["steps"]
    assert sorted(actions) == sorted(rewards) == list(range(total)) and total > 20
    line = get(server, f"{EVAL}/runs/{run_id}/timeline", episode=episode["episode_id"])
    fps = line["videos"][0]["fps"]

    page.goto(server.url + f"/#/runs/{run_id}")
    page.get_by_test_id("episode-row").click()
    page.get_by_test_id("episode-open-viewer").click()
    expect(page.get_by_test_id("episode-viewer")).to_be_visible()
    expect(page.get_by_test_id("viewer-episode-id")).to_have_text(episode["episode_id"])
    expect_step(page, 0, total, actions[0], rewards[0], fps)

    for _ in range(7):
        page.keyboard.press("ArrowRight")
    expect_step(page, 7, total, actions[7], rewards[7], fps)
    page.keyboard.press("ArrowLeft")
    expect_step(page, 6, total, actions[6], rewards[6], fps)
    page.keyboard.press("End")
    expect_step(page, total - 1, total, actions[total - 1], rewards[total - 1], fps)
    expect(page.get_by_test_id("viewer-flags")).to_have_text("success")

    scrubbed = total // 2
    page.get_by_test_id("viewer-scrubber").fill(str(scrubbed))
    expect_step(page, scrubbed, total, actions[scrubbed], rewards[scrubbed], fps)
    page.keyboard.press("Home")
    expect_step(page, 0, total, actions[0], rewards[0], fps)
    page.get_by_test_id("viewer-scrubber").fill(str(scrubbed + 3))
    expect_step(page, scrubbed + 3, total, actions[scrubbed + 3], rewards[scrubbed + 3], fps)

    # the step's observation (what its action led to): its 39 numbers are one summary until clicked
    observation = page.get_by_test_id("viewer-events").locator('[data-kind="observation"]')
    summary = observation.get_by_test_id("viewer-collapsed")
    expect(summary).to_contain_text("float[39] min ")
    expect(observation.get_by_test_id("viewer-expanded")).to_have_count(0)
    summary.click()
    shown = observation.get_by_test_id("viewer-expanded").inner_text()
    assert [float(v) for v in shown.strip("[]").split(",")] == observations[scrubbed + 3 + 1]["state"]
    snap(page, tmp_path, "viewer")


def drawn(page: Page, test_id: str, script: str) -> list[Any]:
    """What `script` (a function of the elements) reads from every element of the viewer with `test_id`."""
    found: list[Any] = page.get_by_test_id(test_id).evaluate_all(script)
    return found


def test_the_viewer_marks_the_dropped_actions_and_held_steps_of_a_realtime_episode(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    # chunks of 5 asked for when the last one ran out, each landing 30 ms (three 80 Hz steps) after it was asked for:
    # its first three actions are stale by then, and the arm holds while it waits
    run_id = "ui-viewer-realtime"
    request = {
        "benchmark": "metaworld",
        "agent": "expert",
        "agent_args": {"chunk_size": 5},
        "tasks": ["reach-v3"],
        "episodes": 1,
        "max_steps": 24,
        "timing": "realtime",
        "timing_options": {"latency_s": 0.03, "refill_steps": 0},
        "run_id": run_id,
    }
    started = server.api.post(f"{EVAL}/start", json=request)
    assert started.status_code == 200, started.text
    assert run_done(server, started.json()["job_id"]) == "done"
    [episode] = get(server, f"{EVAL}/runs/{run_id}/episodes")["episodes"]
    with EvalLog.open(find_run(server.log_dir, run_id)) as log:
        events = log.trace(episode["episode_id"])
    actions = [e for e in events if e["event"] == "action"]
    held = [e["step"] for e in actions if e["hold"]]
    ran = [e["step"] for e in actions if not e["hold"]]
    chunks = [e for e in events if e["event"] == "agent.chunk"]
    stale = [[c["requested_at"] + c["delay_steps"], c["dropped"]] for c in chunks if c["dropped"]]
    later_hold = next(step for step in held if step > ran[0])  # a hold between the agent's actions
    assert len(stale) > 2 and ran

    page.goto(server.url + f"/#/runs/{run_id}/episode/{quote(episode['episode_id'], safe='')}")
    expect(page.get_by_test_id("viewer-episode-id")).to_have_text(episode["episode_id"])
    expect(page.get_by_test_id("viewer-chunk")).to_have_count(len(chunks))
    expect(page.get_by_test_id("viewer-dropped")).to_have_count(len(stale))
    marks = "ms => ms.map(m => [+m.parentElement.dataset.start, +m.dataset.count])"  # (its chunk's merge, count)
    assert drawn(page, "viewer-dropped", marks) == stale
    expect(page.get_by_test_id("viewer-hold")).to_have_count(len(held))
    assert drawn(page, "viewer-hold", "rects => rects.map(r => +r.dataset.step)") == held
    dropped = sum(count for _, count in stale)
    expect(page.get_by_test_id("viewer-lane-chunks")).to_contain_text(f"{len(chunks)}, {dropped} stale")

    page.get_by_test_id("viewer-scrubber").fill(str(later_hold))
    expect(page.get_by_test_id("viewer-step")).to_have_text(f"step {later_hold} / {episode['steps'] - 1}")
    expect(page.get_by_test_id("viewer-held")).to_be_visible()
    expect(page.get_by_test_id("viewer-flags")).to_contain_text("hold")
    page.get_by_test_id("viewer-scrubber").fill(str(ran[0]))
    expect(page.get_by_test_id("viewer-step")).to_have_text(f"step {ran[0]} / {episode['steps'] - 1}")
    expect(page.get_by_test_id("viewer-held")).to_have_count(0)
    snap(page, tmp_path, "viewer-realtime")

"""Time to interactive of the web UI, measured in Debian's Chromium against a real `hylo serve`: the canvas at `/`,
and a run's page with 10,000 episodes against the same page for a 100-episode run.

The runs are real EvalLogs written by the browser tests' generator (`tests/web/synthetic.py`): five tasks, every
status, deterministic. Each load is cold (a new browser context: no cache, empty localStorage). A page is
interactive when what a user acts on is on screen, filled from the API:

- `/`: the canvas' palette of node types (from `GET /api/nodes`);
- a run page: its per-task table and the first page of its episode list.

The time is `performance.now()` (from the start of navigation) when a MutationObserver first sees those elements.
Then, on the 10,000-episode page, the time from a click on "next page" and on a status filter to the new rows.
Each figure is the median over `--repeats` loads. Goal: the 10,000-episode page within 1.5x of the 100-episode one
(the page never holds more than one page of episodes).

    python benchmarks/web_tti.py            # a short table
    python benchmarks/web_tti.py --json     # {"root_tti_ms", "run_100_tti_ms", "run_10000_tti_ms", "ratio", ...}
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "web"))

from browser import CHROMIUM_ARGS, HyloServe, chromium_path
from playwright.sync_api import Browser, Page, sync_playwright
from synthetic import write_run

GOAL_RATIO = 1.5
ROOT_READY = ['[data-testid^="palette-item-"]']
RUN_READY = ['[data-testid="task-table"]', '[data-testid="episode-row"]']

WATCH = """
(selectors) => {
  window.__hyloReady = null;
  const check = () => {
    if (window.__hyloReady === null && selectors.every((s) => document.querySelector(s))) {
      window.__hyloReady = performance.now();
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true, attributes: true });
  check();
}
"""


def load(browser: Browser, url: str, ready: list[str]) -> float:
    """Milliseconds from navigation start until every selector of `ready` is on the page, on a cold load."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(f"({WATCH})({json.dumps(ready)})")
        page.goto(url)
        page.wait_for_function("window.__hyloReady !== null", timeout=60_000)
        return float(page.evaluate("window.__hyloReady"))
    finally:
        context.close()


def react(page: Page, action: Any, changed: str) -> float:
    """Milliseconds from `action()` until the JS condition `changed` holds."""
    start = page.evaluate("performance.now()")
    action()
    page.wait_for_function(changed, timeout=60_000)
    return float(page.evaluate("performance.now()")) - float(start)


def interactions(browser: Browser, url: str) -> dict[str, float]:
    """On the big run's page: the next page of episodes, then a status filter."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(url)
        page.get_by_test_id("episode-row").first.wait_for()
        info = page.get_by_test_id("page-info")
        before = info.inner_text()
        next_ms = react(
            page,
            lambda: page.get_by_test_id("page-next").click(),
            f"document.querySelector('[data-testid=page-info]').innerText !== {json.dumps(before)}",
        )
        before = info.inner_text()
        filter_ms = react(
            page,
            lambda: page.get_by_test_id("status-filter").select_option("error"),
            f"document.querySelector('[data-testid=page-info]').innerText !== {json.dumps(before)}",
        )
        return {"next_page_ms": next_ms, "status_filter_ms": filter_ms}
    finally:
        context.close()


def measure(repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hylo-web-tti-") as tmp:
        log_dir = Path(tmp) / "runs"
        tasks = ["GoToLocal", "PickupLoc", "OpenDoor", "GoToObj", "PutNextLocal"]
        write_run(log_dir, "big", 10_000, tasks)
        write_run(log_dir, "small", 100, tasks)
        server = HyloServe(log_dir, args=["--no-token"])  # every load is a cold one: no stored token to sign in
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
                try:
                    load(browser, server.url + "/", ROOT_READY)  # warm the server's caches and imports
                    figures: dict[str, list[float]] = {"root": [], "small": [], "big": []}
                    for _ in range(repeats):  # interleaved, so drift in the machine's speed hits all alike
                        figures["root"].append(load(browser, server.url + "/", ROOT_READY))
                        figures["small"].append(load(browser, server.url + "/#/runs/small", RUN_READY))
                        figures["big"].append(load(browser, server.url + "/#/runs/big", RUN_READY))
                    steps = interactions(browser, server.url + "/#/runs/big")
                finally:
                    browser.close()
        finally:
            server.close()
    root, small, big = (statistics.median(figures[key]) for key in ("root", "small", "big"))
    return {
        "root_tti_ms": round(root, 1),
        "run_100_tti_ms": round(small, 1),
        "run_10000_tti_ms": round(big, 1),
        "ratio": round(big / small, 3),
        "next_page_ms": round(steps["next_page_ms"], 1),
        "status_filter_ms": round(steps["status_filter_ms"], 1),
        "repeats": repeats,
        "goal_ratio": GOAL_RATIO,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="cold loads of each page (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = measure(args.repeats)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"time to interactive, median of {args.repeats} cold loads in Chromium")
    print(f"  /  (canvas, palette loaded)          {result['root_tti_ms']:8.1f} ms")
    print(f"  run page, 100 episodes               {result['run_100_tti_ms']:8.1f} ms")
    print(f"  run page, 10,000 episodes            {result['run_10000_tti_ms']:8.1f} ms")
    print(f"  ratio 10,000 / 100                   {result['ratio']:8.3f}   (goal <= {GOAL_RATIO})")
    print(f"  10,000 episodes: next page           {result['next_page_ms']:8.1f} ms")
    print(f"  10,000 episodes: status filter       {result['status_filter_ms']:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`hylo report`: one self-contained HTML file of real runs, whose tables and suite figures say what `hylo runs show
--json` says, whose comparison of two runs (its probability of improvement too) is `hylo compare`'s, and whose media
stay within the size bound (those left out listed)."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hylo.cli import main
from hylo.evallog.report_media import MAX_CLIP_FRAMES, MAX_CLIP_SIDE, STRIP_HEIGHT, clip, frame_strip, video_facts
from hylo.evallog.video import VideoWriter

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """babyai expert and random on two tasks (3 episodes each), Meta-World expert and random on two tasks (2
    episodes each, every one recorded); the babyai expert on four tasks under two seeds, cut short at 5 and at 8
    steps (rates between 0 and 1 that differ by task), and on one task."""
    runs = tmp_path_factory.mktemp("report") / "runs"
    babyai = ["babyai", "--task", "GoToLocal", "GoToObj", "--episodes", "3"]
    metaworld = ["metaworld", "--task", "reach-v3", "push-v3", "--episodes", "2", "--video", "2", "--max-steps", "40"]
    for agent, benchmark in (("expert", babyai), ("random", babyai), ("expert", metaworld), ("random", metaworld)):
        name = f"{benchmark[0]}-{agent}"
        assert main(["eval", *benchmark, "--agent", agent, "--run-id", name, "--log-dir", str(runs)]) == 0
    suite = ["babyai", "--task", "GoToLocal", "GoToObj", "GoToRedBall", "GoToRedBallGrey", "--episodes", "3",
             "--seeds", "0", "1"]  # fmt: skip
    for name, args in (
        ("suite-5", [*suite, "--max-steps", "5"]),
        ("suite-8", [*suite, "--max-steps", "8"]),
        ("one-task", ["babyai", "--task", "GoToLocal", "--episodes", "2"]),
    ):
        assert main(["eval", *args, "--agent", "expert", "--run-id", name, "--log-dir", str(runs)]) == 0
    return runs


def _report(log_dir: Path, out: Path, *args: str) -> str:
    assert main(["report", *args, "--log-dir", str(log_dir), "-o", str(out)]) == 0
    return out.read_text()


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


class _Page(HTMLParser):
    """Every attribute that names a resource or a link, and the text of each table's rows by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.rows_attrs: dict[str, list[dict[str, str]]] = {}
        self._table: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v or "" for k, v in attrs}
        for key in ("src", "href", "action", "poster", "data", "srcset", "xlink:href"):
            if key in named:
                self.refs.append((tag, key, named[key]))
        if tag == "table":
            self._table.append(named.get("id", ""))
            self.tables.setdefault(self._table[-1], [])
        elif tag == "tr" and self._table:
            self.tables[self._table[-1]].append([])
            self.rows_attrs.setdefault(self._table[-1], []).append(named)
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table.pop()
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table[-1]][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parsed(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def test_the_report_holds_everything_it_shows_and_names_nothing_outside_it(log_dir, tmp_path):
    html = _report(log_dir, tmp_path / "r.html", "metaworld-expert", "metaworld-random")
    page = _parsed(html)
    assert page.refs, "the report links nothing: its rows and clips should be linked"
    outside = [ref for ref in page.refs if not ref[2].startswith(("#", "data:"))]
    assert outside == []
    assert "http:" not in html and "https:" not in html and "<link" not in html and "url(" not in html
    assert [kind for tag, _, kind in page.refs if tag == "video"] and all(
        value.startswith("data:video/mp4;base64,") for tag, _, value in page.refs if tag == "video"
    )


def test_the_per_task_table_says_what_runs_show_json_says(log_dir, tmp_path, capsys):
    html = _report(log_dir, tmp_path / "r.html", "babyai-random")
    shown = _json(capsys, "runs", "show", "babyai-random", "--log-dir", str(log_dir), "--json")["summary"]
    table = _parsed(html).tables["tasks-0"]
    header, rows = table[0], {row[0]: row for row in table[1:]}
    expected = {**shown["per_task"], "overall": shown}
    assert set(rows) == set(expected)
    for task, summary in expected.items():
        cells = dict(zip(header, rows[task], strict=True))
        assert int(cells["n"]) == summary["n"]
        for status, count in summary["status_counts"].items():
            column = {"infra_invalid": "infra", "safety_abort": "safety"}.get(status, status)
            assert int(cells[column]) == count, (task, status)
        assert cells["success rate"] == f"{summary['success_rate']:.3f}"
        low, high = summary["success_ci"]
        assert cells["95% CI"] == f"[{low:.3f}, {high:.3f}]"
        assert cells["conservative"] == f"{summary['conservative_success_rate']:.3f}"
        assert cells["return"].startswith(f"{summary['mean_return']:.3g}")


def test_two_runs_give_the_comparison_and_the_flips_compare_gives(log_dir, tmp_path, capsys):
    html = _report(log_dir, tmp_path / "r.html", "babyai-expert", "babyai-random")
    compared = _json(capsys, "compare", "babyai-expert", "babyai-random", "--log-dir", str(log_dir), "--json")
    page = _parsed(html)
    paired = {row[0]: row for row in page.tables["paired"][1:]}
    for task, part in compared["per_task"].items():
        assert paired[task][1] == str(part["n_pairs"])
        assert paired[task][4] == f"{part['difference']:+.3f}"
        assert paired[task][10] == f"{part['p_value']:.4g}" and paired[task][11] == f"{part['p_holm']:.4g}"
    assert paired["overall"][10] == f"{compared['p_value']:.4g}"
    assert compared["flips"], "expert against random should flip some episode"
    shown = [
        (attrs["data-episode"], cells[2], cells[3])
        for table in ("flips-a-table", "flips-b-table")
        for attrs, cells in zip(page.rows_attrs.get(table, [])[1:], page.tables.get(table, [])[1:], strict=True)
    ]
    assert sorted(shown) == sorted((f["episode_id"], f["status_a"], f["status_b"]) for f in compared["flips"])
    for flip in compared["flips"]:  # each links to its row in both runs
        row = re.search(rf'data-episode="{re.escape(flip["episode_id"])}">.*?</tr>', html).group()
        for target in re.findall(r'href="#(r[01]-e\d+)"', row):
            assert f'id="{target}"' in html


def test_the_suite_block_says_what_runs_show_json_says_and_a_one_task_run_has_none(log_dir, tmp_path, capsys):
    runs = ("suite-5", "metaworld-expert", "one-task")
    html = _report(log_dir, tmp_path / "r.html", *runs)
    tables = _parsed(html).tables
    sections = re.split(r'<section class="card" id="run-\d+">', html)[1:]
    for i, run in enumerate(runs[:2]):
        shown = _json(capsys, "runs", "show", run, "--log-dir", str(log_dir), "--json")["suite"]
        rows = {row[0]: row[1:] for row in tables[f"suite-{i}"][1:]}
        for name, key in (("mean over tasks", "mean"), ("IQM", "iqm")):
            low, high = shown[f"{key}_ci"]
            assert rows[name] == [f"{shown[key]:.3f}", f"[{low:.3f}, {high:.3f}]"], (run, key)
        counts = re.search(r"<dt>tasks</dt><dd>(\d+)</dd><dt>seeds</dt><dd>(\d+)</dd>", sections[i])
        assert counts is not None and (int(counts[1]), int(counts[2])) == (shown["tasks"], shown["seeds"])
    assert (shown["tasks"], shown["seeds"]) == (2, 1)  # Meta-World's
    assert "suite-2" not in tables and "<h3>suite</h3>" not in sections[2]
    assert "tasks-2" in tables


def test_two_runs_of_several_tasks_give_the_probability_of_improvement_compare_gives(log_dir, tmp_path, capsys):
    scores = []
    for a, b in (("suite-5", "suite-8"), ("metaworld-expert", "metaworld-random")):
        html = _report(log_dir, tmp_path / f"{a}.html", a, b)
        improved = _json(capsys, "compare", a, b, "--log-dir", str(log_dir), "--json")["improvement"]
        scores.append(improved["scores"])
        rows = {row[0]: row[1:] for row in _parsed(html).tables["improvement"][1:]}
        low, high = improved["ci"]
        overall = [f"{improved['probability']:.3f}", f"[{low:.3f}, {high:.3f}]"]
        per_task = {task: [f"{p:.3f}", "—"] for task, p in improved["per_task"].items()}
        assert rows == {**per_task, f"over {improved['tasks']} tasks": overall}, (a, b)
    assert scores == ["seed", "episode"]  # two seeds compare the seeds' rates; one, the episodes' outcomes


def test_the_size_bound_holds_and_what_it_left_out_is_listed(log_dir, tmp_path):
    runs = ("metaworld-expert", "metaworld-random")
    full = len(_report(log_dir, tmp_path / "full.html", *runs).encode())
    bare = len(_report(log_dir, tmp_path / "bare.html", *runs, "--clips", "0").encode())
    bound = bare + (full - bare) // 2
    html = _report(log_dir, tmp_path / "bound.html", *runs, "--max-mb", f"{bound / MIB:.9f}")
    assert len(html.encode()) <= bound
    embedded = html.count("<figure ")
    left_out = re.findall(r"<li><code>([^<]+)</code>: not embedded \(size bound\)</li>", html)
    assert embedded and left_out, (embedded, left_out)
    assert embedded + len(left_out) == 8  # 2 runs x 2 tasks x 2 episodes recorded
    for episode_id in left_out:  # its row says so too
        assert re.search(rf"{re.escape(episode_id)}</td>.*?not embedded \(size bound\)</td></tr>", html)


def test_more_than_two_runs_get_a_summary_table_and_no_pairing(log_dir, tmp_path):
    html = _report(log_dir, tmp_path / "r.html", "babyai-expert", "babyai-random", "metaworld-expert")
    page = _parsed(html)
    assert [row[0] for row in page.tables["summary"][1:]] == ["babyai-expert", "babyai-random", "metaworld-expert"]
    assert "paired" not in page.tables and 'id="comparison"' not in html
    assert all(f"tasks-{i}" in page.tables for i in range(3))


def test_the_summary_of_several_runs_gives_each_suites_mean_over_tasks(log_dir, tmp_path, capsys):
    runs = ("suite-5", "metaworld-expert", "one-task")
    page = _parsed(_report(log_dir, tmp_path / "r.html", *runs))
    header, *rows = page.tables["summary"]
    column = header.index("mean over tasks")
    for run, cells in zip(runs, rows, strict=True):
        suite = _json(capsys, "runs", "show", run, "--log-dir", str(log_dir), "--json")["suite"]
        if suite["mean"] is None:
            assert cells[column : column + 2] == ["—", "—"]
        else:
            low, high = suite["mean_ci"]
            assert cells[column : column + 2] == [f"{suite['mean']:.3f}", f"[{low:.3f}, {high:.3f}]"]
    assert [cells[column] == "—" for cells in rows] == [False, False, True]


def test_a_long_large_video_is_embedded_smaller_and_shorter(tmp_path):
    path = tmp_path / "long.mp4"
    rng = np.random.default_rng(0)
    with VideoWriter(path, fps=30) as writer:
        for k in range(300):
            frame = np.zeros((360, 640, 3), np.uint8)
            frame[:, (2 * k) % 640 :] = rng.integers(0, 255, 3, dtype=np.uint8)
            writer.add(frame)
    medium = clip(path)
    assert medium is not None and medium.kind == "video"
    small = tmp_path / "small.mp4"
    small.write_bytes(medium.data)
    facts = video_facts(small)
    assert facts.codec == "h264" and max(facts.width, facts.height) <= MAX_CLIP_SIDE
    assert facts.frames <= MAX_CLIP_FRAMES and len(medium.data) < path.stat().st_size
    strip = frame_strip(path)
    assert strip.mime == "image/jpeg" and strip.data[:2] == b"\xff\xd8"
    assert Image.open(io.BytesIO(strip.data)).height == STRIP_HEIGHT

"""A report of one or more runs as ONE self-contained HTML file (`hylo report`): every style, script, chart and clip
inline, no URL outside the file, so it opens offline wherever it is sent.

Per run: what identifies it, the per-task table and a chart of it, the suite figures of a run of several tasks (`hylo
runs show`'s mean over tasks and IQM), status counts, reason groups, the episode list (filterable by task and status)
and embedded media of the first `per_group` episodes of each task and status that recorded a video. Two runs add
their paired comparison and probability of improvement (`hylo compare`'s); more add a summary table.

The file is held to `max_bytes`. The tables are always whole; media are added in priority order (flipped episodes
first, then the first of each task and status, failures before successes) while they fit, a clip where it fits, else
a strip of frames, and those left out are listed as "not embedded (size bound)".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from hylo.confined import confined_file
from hylo.core.status import EpisodeStatus
from hylo.envs.gym_ids import short_episode_id
from hylo.evallog.reasons import ORDER
from hylo.evallog.report_comparison import compared, comparison_section
from hylo.evallog.report_media import Medium, UnreadableVideo, clip, frame_strip
from hylo.evallog.report_page import card, esc, note, page
from hylo.evallog.report_sections import (
    Anchors,
    ReportRun,
    chart,
    episodes,
    identity,
    reasons,
    spec_json,
    status_counts,
    suite_block,
    summary_table,
    task_table,
)
from hylo.evallog.rows import EpisodeRow
from hylo.stats.success import Comparison
from hylo.version import __version__

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_PER_GROUP", "LeftOut", "Report", "ReportRun", "build_report"]

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
"""The largest report by default: 20 MiB, what a mail attachment usually may be."""
DEFAULT_PER_GROUP = 2
"""How many episodes of each task and status a report embeds media of by default."""
SIZE_BOUND = "not embedded (size bound)"
MIN_MEDIUM_BYTES = 4096
"""Below this much room left, no medium is tried: none would fit."""

_STATUS_PRIORITY = (*ORDER, EpisodeStatus.SUCCESS)
"""Whose media come first: the episodes a reader asks "why?" of before the successes."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """An episode whose recorded video a report may embed: its run, its place in the run's episodes, its row, its
    video file, its rank in its task and status (0 for the first) and whether it flipped between two runs."""

    run: int
    index: int
    episode: EpisodeRow
    path: Path
    rank: int
    flipped: bool


@dataclass(frozen=True, slots=True)
class LeftOut:
    """An episode whose medium the report does not embed, and why."""

    run_id: str
    episode_id: str
    why: str


@dataclass
class Report:
    """A built report: its HTML, and what it embeds and leaves out."""

    html: str
    clips: int = 0
    strips: int = 0
    left_out: list[LeftOut] = field(default_factory=list)

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return len(self.html.encode())


@dataclass
class _Media:
    """The media chosen so far: by (run, episode id), the medium and its caption's note; and those left out."""

    chosen: dict[tuple[int, str], Medium] = field(default_factory=dict)
    left_out: dict[tuple[int, str], str] = field(default_factory=dict)


def build_report(
    runs: Sequence[ReportRun], *, per_group: int = DEFAULT_PER_GROUP, max_bytes: int = DEFAULT_MAX_BYTES
) -> Report:
    """The report of `runs` (the first two paired when there are exactly two), held to `max_bytes` as far as media
    go (the tables are always whole, so a page whose text alone is larger is written larger)."""
    comparison = compared(runs[0], runs[1]) if len(runs) == 2 else None
    candidates = media_candidates(runs, per_group, comparison)
    media = _Media(left_out={(c.run, c.episode.episode_id): SIZE_BOUND for c in candidates})
    base = _render(runs, comparison, media)
    _choose(candidates, media, max_bytes - len(base.encode()), lambda c, m: _figure_html(c.run, c.index, c.episode, m))
    html = _render(runs, comparison, media)
    clips = sum(m.kind == "video" for m in media.chosen.values())
    left_out = [LeftOut(runs[i].info.run_id, episode_id, why) for (i, episode_id), why in media.left_out.items()]
    return Report(html, clips=clips, strips=len(media.chosen) - clips, left_out=left_out)


def media_candidates(runs: Sequence[ReportRun], per_group: int, comparison: Comparison | str | None) -> list[Candidate]:
    """The first `per_group` episodes of each run's tasks and statuses that have a video in their run's directory,
    in the order their media are embedded."""
    flipped = {flip.episode_id for flip in comparison.flips} if isinstance(comparison, Comparison) else set()
    found = []
    for i, run in enumerate(runs):
        seen: dict[tuple[str, EpisodeStatus], int] = {}
        for j, episode in enumerate(run.rows):
            path = _video(run, episode)
            key = (episode.task, episode.status)
            if path is None or seen.get(key, 0) >= per_group:
                continue
            rank = seen[key] = seen.get(key, 0) + 1
            flip = short_episode_id(episode.episode_id, episode.task) in flipped
            found.append(Candidate(i, j, episode, path, rank - 1, flip))
    return sorted(found, key=lambda c: (not c.flipped, c.rank, _STATUS_PRIORITY.index(c.episode.status), c.run))


def _video(run: ReportRun, episode: EpisodeRow) -> Path | None:
    """The episode's recorded video, when it is a file inside its run's directory."""
    return confined_file(run.info.path, PurePath(episode.video)) if episode.video else None


def _choose(
    candidates: Sequence[Candidate], media: _Media, budget: int, figure: Callable[[Candidate, Medium], str]
) -> None:
    """Embed each candidate's clip, else its frame strip, while the figure fits what is left of `budget` (bytes); a
    video that cannot be read is left out saying so."""
    for candidate in candidates:
        key = (candidate.run, candidate.episode.episode_id)
        if budget < MIN_MEDIUM_BYTES:
            break
        try:
            for make in (clip, frame_strip):
                medium = make(candidate.path)
                cost = budget + 1 if medium is None else len(figure(candidate, medium).encode())
                if medium is not None and cost <= budget:
                    media.chosen[key] = medium
                    del media.left_out[key]
                    budget -= cost
                    break
        except UnreadableVideo as exc:
            media.left_out[key] = f"not embedded ({exc})"


# -- the page ------------------------------------------------------------------------------------------------------


def _render(runs: Sequence[ReportRun], comparison: Comparison | str | None, media: _Media) -> str:
    anchors = Anchors()
    for i, run in enumerate(runs):
        anchors.add_run(i, run.rows)
    for i, episode_id in media.chosen:
        anchors.add_medium(i, runs[i].rows[anchors.positions[(i, episode_id)]])
    parts = [_header(runs)]
    if comparison is not None:
        heading = "<h2>comparison (paired, as hylo compare)</h2>"
        parts.append(card("comparison", heading, comparison_section(runs[0], runs[1], comparison, anchors)))
    if len(runs) > 1:
        parts.append(card("summary", "<h2>runs</h2>", summary_table(runs)))
    parts += [_run_section(i, run, anchors, media, paired=len(runs) == 2) for i, run in enumerate(runs)]
    title = "hylo report: " + ", ".join(run.info.run_id for run in runs)
    return page(title, "".join(parts))


def _header(runs: Sequence[ReportRun]) -> str:
    generated = time.strftime("%Y-%m-%d %H:%M:%S %z")
    links = " ".join(f'<a href="#run-{i}">{esc(run.info.run_id)}</a>' for i, run in enumerate(runs))
    extra = ('<a href="#comparison">comparison</a> ' if len(runs) == 2 else "") + (
        '<a href="#summary">runs</a> ' if len(runs) > 1 else ""
    )
    return (
        f'<h1>hylo report</h1><p class="dim">{len(runs)} run{"s" * (len(runs) != 1)} · generated {generated} '
        f"by hylo {esc(__version__)}</p><nav>{extra}{links}</nav>"
    )


def _run_section(i: int, run: ReportRun, anchors: Anchors, media: _Media, *, paired: bool) -> str:
    notes = {episode_id: why for (k, episode_id), why in media.left_out.items() if k == i}
    parts = [
        identity(run),
        spec_json(run.info),
        "<h3>per task</h3>",
        task_table(i, run),
        "<h3>success per task (95% Wilson interval)</h3>",
        chart(run),
        suite_block(i, run),
        "<h3>status counts</h3>",
        status_counts(run),
        "<h3>why episodes did not succeed</h3>",
        reasons(i, run, anchors),
        "<h3>episodes</h3>",
        episodes(i, run, anchors, notes),
        "<h3>clips</h3>",
        _gallery(i, run, media),
    ]
    side = (" (A)", " (B)")[i] if paired else ""
    return card(f"run-{i}", f"<h2>{esc(run.info.run_id)}{side}</h2>", *parts)


def _gallery(i: int, run: ReportRun, media: _Media) -> str:
    """The run's embedded media, each captioned and linked to its row; then those left out, and why."""
    figures = [
        _figure_html(i, j, episode, media.chosen[(i, episode.episode_id)])
        for j, episode in enumerate(run.rows)
        if (i, episode.episode_id) in media.chosen
    ]
    left = [(episode_id, why) for (k, episode_id), why in media.left_out.items() if k == i]
    parts = [f'<div class="gallery">{"".join(figures)}</div>'] if figures else []
    if left:
        items = "".join(f"<li><code>{esc(episode_id)}</code>: {esc(why)}</li>" for episode_id, why in left)
        parts.append(f"<p>left out ({len(left)}):</p><ul>{items}</ul>")
    if not figures and not left:
        parts.append(note("no episode of this run recorded a video (hylo eval --video N records the first N per task)"))
    return "".join(parts)


def _figure_html(i: int, j: int, episode: EpisodeRow, medium: Medium) -> str:
    """Run `i`'s `j`-th episode's clip (a looping, muted video with controls) or frame strip, captioned with its id,
    status and reason, linked to its row."""
    if medium.kind == "video":
        element = f'<video src="{medium.uri()}" controls autoplay muted loop playsinline></video>'
    else:
        element = f'<img src="{medium.uri()}" alt="frames of {esc(episode.episode_id)}">'
    caption = (
        f'<a href="#r{i}-e{j}">{esc(episode.episode_id)}</a><br><span class="status-{episode.status.value}">'
        f"{esc(episode.status.value)}</span> · {esc(episode.reason)} · {episode.steps} steps"
        f"{' · frames' if medium.kind == 'image' else ''}"
    )
    return f'<figure id="r{i}-m{j}">{element}<figcaption>{caption}</figcaption></figure>'

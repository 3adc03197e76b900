"""The canvas (`#/canvas`): open a graph, add and connect nodes with typed ports, see a wrong connection refused,
edit a config through its generated form, save, and see the server's validation problems on the offending nodes;
every example readable at fit, Layout, Validate, Run beside the canvas (node states, edge values) and the guard on
unsaved edits."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from browser import HyloServe, snap
from playwright.sync_api import Dialog, FloatRect, Locator, Page, expect

EXPERT_NODES = ("reset", "iterIn", "observe", "reason", "step", "iterOut", "evaluate")


def open_canvas(page: Page, server: HyloServe, graph: str) -> None:
    page.goto(server.url + "/#/canvas")
    page.get_by_test_id("graph-select").select_option(graph)
    expect(page.get_by_test_id("graph-name")).to_have_value(graph)


def handle(page: Page, node: str, port: str, kind: str) -> Locator:
    """The `kind` ("source": an output, "target": an input) handle of `node`'s port."""
    return page.get_by_test_id(f"node-{node}").locator(f'.react-flow__handle.{kind}[data-handleid="{port}"]')


def box(locator: Locator) -> FloatRect:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not on screen"
    return found


def centre(locator: Locator) -> tuple[float, float]:
    found = box(locator)
    return found["x"] + found["width"] / 2, found["y"] + found["height"] / 2


def connect(page: Page, source: Locator, target: Locator) -> None:
    """Drag from an output handle to an input handle, as a user does."""
    x, y = centre(source)
    page.mouse.move(x, y)
    page.mouse.down()
    tx, ty = centre(target)
    page.mouse.move((x + tx) / 2, (y + ty) / 2 + 30, steps=6)
    page.mouse.move(tx, ty, steps=8)
    page.mouse.up()


def position(page: Page, node: str) -> tuple[int, int]:
    raw = page.get_by_test_id(f"node-{node}").get_attribute("data-position")
    assert raw is not None
    x, y = raw.split(",")
    return int(x), int(y)


def inside(outer: FloatRect, inner: FloatRect) -> bool:
    return (
        outer["x"] <= inner["x"]
        and outer["y"] <= inner["y"]
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    )


def port_wire(server: HyloServe, node_type: str, side: str, port: str) -> str:
    """The wire of `node_type`'s `port` (`side`: "inputs" or "outputs"), as `GET /api/nodes` declares it."""
    for group in server.api.get("/api/nodes").json()["nodesets"]:
        for node in group["nodes"]:
            if node["type"] == node_type:
                wire: str = next(p["wire"] for p in node[side] if p["name"] == port)
                return wire
    raise AssertionError(f"no node type {node_type}")


def node_type(document: dict[str, Any], node: str) -> str:
    found: str = next(n["type"] for n in document["nodes"] if n["id"] == node)
    return found


def save_as(page: Page, name: str) -> None:
    page.get_by_test_id("graph-name").fill(name)
    page.get_by_test_id("save-graph").click()


def test_open_add_connect_refuse_save_and_reopen(server: HyloServe, page: Page, tmp_path: Path) -> None:
    example: dict[str, Any] = server.api.get("/api/graphs/babyai_expert").json()
    open_canvas(page, server, "babyai_expert")
    for node in EXPERT_NODES:
        expect(page.get_by_test_id(f"node-{node}")).to_be_visible()
    expect(page.locator(".react-flow__edge")).to_have_count(7)
    region = page.get_by_test_id("loop-region")
    expect(region).to_contain_text("loop")
    region_box = box(region)
    boxes = {node: box(page.get_by_test_id(f"node-{node}")) for node in EXPERT_NODES}
    assert all(inside(region_box, boxes[n]) for n in ("iterIn", "observe", "reason", "step", "iterOut"))
    assert not any(inside(region_box, boxes[n]) for n in ("reset", "evaluate"))
    expect(page.get_by_test_id("palette-group-babyai")).to_be_visible()

    # add a node from the palette and connect iterIn's step index (integer) to its trigger (any)
    page.get_by_test_id("palette-item-babyai.observe_instruction").click()
    added = page.get_by_test_id("node-observe_instruction")
    expect(added).to_be_visible()
    expect(added).to_contain_text("instruction")
    expect(added).to_contain_text("text")
    connect(page, handle(page, "iterIn", "step", "source"), handle(page, "observe_instruction", "trigger", "target"))
    expect(page.get_by_test_id("rf__edge-iterIn.step->observe_instruction.trigger")).to_have_count(1)
    expect(page.locator(".react-flow__edge")).to_have_count(8)
    expect(page.get_by_test_id("connection-refused")).to_have_count(0)

    # text cannot feed the step node's action (a chunk): refused on the spot, with why
    connect(
        page, handle(page, "observe_instruction", "instruction", "source"), handle(page, "step", "action", "target")
    )
    text = port_wire(server, "babyai.observe_instruction", "outputs", "instruction")
    chunk = port_wire(server, node_type(example, "step"), "inputs", "action")
    refused = page.get_by_test_id("connection-refused")
    expect(refused).to_contain_text(
        f"refused: `instruction` ({text}) of observe_instruction cannot feed `action` ({chunk}) of step"
    )
    expect(page.locator(".react-flow__edge")).to_have_count(8)
    snap(page, tmp_path, "refused")

    # move the new node, then save under a new name
    header = added.locator(".node-head")
    before = position(page, "observe_instruction")
    x, y = centre(header)
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 60, y + 80, steps=8)
    page.mouse.up()
    expect(added).not_to_have_attribute("data-position", f"{before[0]},{before[1]}")
    save_as(page, "canvas_added")
    expect(page.get_by_test_id("canvas-message")).to_have_text("saved as canvas_added×")
    expect(page).to_have_url(server.url + "/#/canvas/canvas_added")

    saved = server.api.get("/api/graphs/canvas_added").json()
    moved = (
        saved["layout"]["positions"]["observe_instruction"]["x"],
        saved["layout"]["positions"]["observe_instruction"]["y"],
    )
    expect(added).to_have_attribute("data-position", f"{moved[0]},{moved[1]}")  # saved where the page shows it
    assert moved[0] > before[0] and moved[1] > before[1]  # dragged right and down
    assert {"id": "observe_instruction", "type": "babyai.observe_instruction", "config": {}} in saved["nodes"]
    assert {
        "source": "iterIn",
        "sourceHandle": "step",
        "target": "observe_instruction",
        "targetHandle": "trigger",
    } in saved["edges"]
    assert not any(edge["source"] == "observe_instruction" for edge in saved["edges"])
    positions = saved["layout"]["positions"]
    assert set(positions) == {*EXPERT_NODES, "observe_instruction"}
    reason = example["layout"]["positions"]["reason"]
    assert positions["reason"] == reason  # an untouched node stays where the example had it

    # open another graph, then this one again: the positions are restored
    page.get_by_test_id("graph-select").select_option("babyai_expert")
    expect(page.get_by_test_id("node-observe_instruction")).to_have_count(0)
    page.get_by_test_id("graph-select").select_option("canvas_added")
    expect(page.get_by_test_id("node-observe_instruction")).to_be_visible()
    expect(page.get_by_test_id("node-observe_instruction")).to_have_attribute("data-position", f"{moved[0]},{moved[1]}")
    expect(page.get_by_test_id("node-reason")).to_have_attribute("data-position", f"{reason['x']},{reason['y']}")
    expect(page.locator(".react-flow__edge")).to_have_count(8)


def test_validation_problems_show_on_the_offending_node(server: HyloServe, page: Page, tmp_path: Path) -> None:
    open_canvas(page, server, "babyai_expert")
    edge = page.get_by_test_id("rf__edge-reason.chunk->step.action")
    expect(edge).to_have_count(1)
    edge.click()
    expect(page.get_by_test_id("delete-edge")).to_be_visible()
    page.keyboard.press("Delete")
    expect(edge).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(6)

    # what the API answers for the same graph
    document: dict[str, Any] = server.api.get("/api/graphs/babyai_expert").json()
    document["name"] = "canvas_broken_api"
    document["edges"] = [e for e in document["edges"] if (e["source"], e["target"]) != ("reason", "step")]
    answer = server.api.put("/api/graphs/canvas_broken_api", json=document)
    assert answer.status_code == 422
    problems = answer.json()["detail"]
    expected = [problem["message"] for problem in problems if problem["node"] == "step"]
    assert expected and any("'action'" in message for message in expected)

    save_as(page, "canvas_broken")
    count = len(problems)
    expect(page.get_by_test_id("canvas-message")).to_contain_text(
        f"not saved: the server found {count} problem{'' if count == 1 else 's'}"
    )

    on_node = page.get_by_test_id("node-error-step")
    expect(on_node.locator(".message")).to_have_text(expected)
    expect(page.get_by_test_id("node-step")).to_have_class(re.compile(r"\bhas-problems\b"))
    expect(page.get_by_test_id("node-error-reason")).to_have_count(0)
    panel = page.get_by_test_id("problems-panel")
    expect(panel.get_by_test_id("problem-item")).to_have_count(count)
    expect(panel).to_contain_text(expected[0])
    snap(page, tmp_path, "problems")
    assert server.api.get("/api/graphs/canvas_broken").status_code == 404


def test_config_form_edits_are_saved(server: HyloServe, page: Page, tmp_path: Path) -> None:
    open_canvas(page, server, "metaworld_chunked_expert")
    page.get_by_test_id("node-reason").locator(".node-head").click()
    form = page.get_by_test_id("config-form")
    expect(form).to_be_visible()
    expect(form).to_contain_text("the agent's keyword arguments")  # the schema's description as help
    expect(form.get_by_test_id("config-field-agent")).to_have_value("expert")
    args = form.get_by_test_id("config-field-args")
    assert json.loads(args.input_value()) == {"chunk_size": 4, "execution_steps": 2}

    args.fill('{"chunk_size": 8,')
    expect(form).to_contain_text("not JSON")
    args.fill('{"chunk_size": 8, "execution_steps": 3}')
    expect(form).not_to_contain_text("not JSON")

    # drag a constant from the palette onto the empty space above the graph; its wire (an enum) sets its port's
    page.get_by_test_id("palette-item-constant").drag_to(
        page.get_by_test_id("canvas-flow"), target_position={"x": 300, "y": 80}
    )
    constant = page.get_by_test_id("node-constant")
    expect(constant).to_be_visible()
    assert position(page, "constant")[1] < position(page, "reason")[1]
    expect(constant.locator(".port-out")).to_have_text("valuejson")
    constant.locator(".node-head").click()
    expect(form.get_by_test_id("config-field-wire")).to_be_visible()
    form.get_by_test_id("config-field-wire").select_option("text")
    form.get_by_test_id("config-field-value").fill('"pick up the ball"')
    expect(constant.locator(".port-out")).to_have_text("valuetext")
    snap(page, tmp_path, "config")

    save_as(page, "canvas_config")
    expect(page.get_by_test_id("canvas-message")).to_have_text("saved as canvas_config×")
    saved = server.api.get("/api/graphs/canvas_config").json()
    nodes = {node["id"]: node for node in saved["nodes"]}
    assert nodes["reason"]["config"] == {"agent": "expert", "args": {"chunk_size": 8, "execution_steps": 3}}
    assert nodes["constant"] == {
        "id": "constant",
        "type": "constant",
        "config": {"wire": "text", "value": "pick up the ball"},
    }


def test_unknown_node_type_and_missing_graph_are_readable(server: HyloServe, page: Page, tmp_path: Path) -> None:
    document: dict[str, Any] = server.api.get("/api/graphs/babyai_expert").json()
    document["name"] = "canvas_unknown"
    document["nodes"].append({"id": "mystery", "type": "babyai.teleport", "config": {"to": "moon"}})
    document["edges"].append(
        {"source": "reset", "sourceHandle": "instruction", "target": "mystery", "targetHandle": "where"}
    )
    del document["layout"]
    graphs = server.log_dir / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    (graphs / "canvas_unknown.json").write_text(json.dumps(document))

    page.goto(server.url + "/#/canvas/canvas_unknown")
    expect(page.get_by_test_id("node-unknown-mystery")).to_contain_text('unknown node type "babyai.teleport"')
    expect(page.get_by_test_id("rf__edge-reset.instruction->mystery.where")).to_have_count(1)
    # no saved layout: laid out left to right by topological order
    assert position(page, "reset")[0] < position(page, "iterIn")[0] < position(page, "observe")[0]
    assert position(page, "iterOut")[0] < position(page, "evaluate")[0]
    save_as(page, "canvas_unknown")
    expect(page.get_by_test_id("node-error-mystery")).to_contain_text("unknown_node_type")
    snap(page, tmp_path, "unknown")

    page.goto(server.url + "/#/canvas/no_such_graph")
    expect(page.get_by_test_id("canvas-message")).to_contain_text('graph "no_such_graph" could not be opened: 404')


# -- readable at fit, validate, run, the unsaved-edits guard -------------------------------------------------------

ON_SCREEN = """() => {
  const zoom = new DOMMatrix(getComputedStyle(document.querySelector('.react-flow__viewport')).transform).a;
  const fonts = [];
  for (const element of document.querySelectorAll('.react-flow__node-hylo *')) {
    const text = [...element.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (text) fonts.push(parseFloat(getComputedStyle(element).fontSize));
  }
  const paths = [...document.querySelectorAll('.react-flow__edge-path')];
  const marked = paths.filter((p) => {
    const id = /url\\(['"]?#([^'")]+)/.exec(p.getAttribute('marker-end') || '');
    return id && document.getElementById(id[1]) !== null;
  });
  return {
    zoom,
    font: Math.min(...fonts),
    stroke: Math.min(...paths.map((p) => parseFloat(getComputedStyle(p).strokeWidth))),
    edges: paths.length,
    arrowheads: marked.length,
  };
}"""


def fitted(page: Page, before: str | None) -> None:
    """Wait until the canvas has fitted the view again (after the fit counted `before`)."""
    flow = page.get_by_test_id("canvas-flow")
    expect(flow).not_to_have_attribute("data-fits", before or "0")


def test_every_example_is_readable_at_fit(server: HyloServe, page: Page, tmp_path: Path) -> None:
    examples = [g["name"] for g in server.api.get("/api/graphs").json()["graphs"] if g["builtin"]]
    assert {"babyai_expert", "babyai_memory", "metaworld_chunked_expert"} <= set(examples)
    page.goto(server.url + "/#/canvas")
    for name in examples:
        before = page.get_by_test_id("canvas-flow").get_attribute("data-fits")
        page.get_by_test_id("graph-select").select_option(name)
        fitted(page, before)
        shown = page.evaluate(ON_SCREEN)
        edges = len(server.api.get(f"/api/graphs/{name}").json()["edges"])
        assert shown["font"] * shown["zoom"] >= 11, f"{name}: node text is {shown['font'] * shown['zoom']:.1f} px"
        assert shown["stroke"] * shown["zoom"] >= 1.5, f"{name}: edges are {shown['stroke'] * shown['zoom']:.2f} px"
        assert shown["edges"] == shown["arrowheads"] == edges
    snap(page, tmp_path, "fit")


def test_layout_lays_the_graph_out_left_to_right_as_an_edit(server: HyloServe, page: Page) -> None:
    open_canvas(page, server, "babyai_memory")
    expect(page.get_by_test_id("unsaved")).to_have_count(0)
    before = {node: position(page, node) for node in ("reset", "recall", "total")}
    page.get_by_test_id("layout-graph").click()
    expect(page.get_by_test_id("node-recall")).not_to_have_attribute("data-position", "{},{}".format(*before["recall"]))
    order = [position(page, n)[0] for n in ("reset", "iterIn", "observe", "reason", "step", "iterOut", "evaluate")]
    assert order == sorted(order) and len(set(order)) == len(order)
    expect(page.get_by_test_id("unsaved")).to_be_visible()


def test_validate_then_run_the_open_graph_beside_the_canvas(server: HyloServe, page: Page, tmp_path: Path) -> None:
    open_canvas(page, server, "babyai_expert")
    page.get_by_test_id("validate-graph").click()
    expect(page.get_by_test_id("canvas-message")).to_contain_text("valid: the server found no problem")
    expect(page.get_by_test_id("problems-panel")).to_have_count(0)

    page.get_by_test_id("run-graph").click()
    panel = page.get_by_test_id("run-panel")
    expect(panel).to_be_visible()
    expect(panel.get_by_test_id("outcome-status")).to_have_text("success", timeout=60_000)
    expect(panel.get_by_test_id("live-frame")).to_be_visible()
    for node in EXPERT_NODES:
        shown = page.get_by_test_id(f"node-{node}")
        expect(shown).to_have_attribute("data-state", "done")
        expect(shown).to_have_class(re.compile(r"\brun-done\b"))
    expect(page.get_by_test_id("node-state-step")).to_contain_text(re.compile(r"done ×\d+", re.IGNORECASE))

    page.get_by_test_id("rf__edge-observe.observation->reason.observation").hover()
    value = page.get_by_test_id("edge-value")
    expect(value).to_contain_text("observe.observation->reason.observation")
    expect(value).to_contain_text(re.compile(r"uint8 \d+×\d+×3 min \d+ max \d+"))  # the image, summarised
    snap(page, tmp_path, "run")

    # run, not saved: the example is not shadowed by a copy
    example = next(g for g in server.api.get("/api/graphs").json()["graphs"] if g["name"] == "babyai_expert")
    assert example["builtin"] and not example["shadows_builtin"]
    page.get_by_test_id("close-run").click()
    expect(page.get_by_test_id("run-panel")).to_have_count(0)
    expect(page.get_by_test_id("node-reset")).not_to_have_attribute("data-state", "done")
    assert server.api.get("/api/sessions").json()["sessions"] == []


def test_an_invalid_edit_shows_on_its_node_and_port_on_validate(server: HyloServe, page: Page, tmp_path: Path) -> None:
    open_canvas(page, server, "babyai_expert")
    page.get_by_test_id("rf__edge-reason.chunk->step.action").click()
    page.keyboard.press("Delete")
    expect(page.locator(".react-flow__edge")).to_have_count(6)
    page.get_by_test_id("validate-graph").click()
    expect(page.get_by_test_id("canvas-message")).to_contain_text("invalid: the server found")
    expect(page.get_by_test_id("node-error-step")).to_contain_text("'action'")
    expect(page.get_by_test_id("node-step")).to_have_class(re.compile(r"\bhas-problems\b"))
    expect(page.get_by_test_id("port-problem-step-action")).to_be_visible()
    expect(page.get_by_test_id("node-error-reason")).to_have_count(0)
    expect(page.get_by_test_id("problems-panel")).to_contain_text("(last validation)")
    snap(page, tmp_path, "invalid")

    page.get_by_test_id("run-graph").click()  # the server refuses to run it, with the same problems
    expect(page.get_by_test_id("canvas-message")).to_contain_text("not run: the server found")
    expect(page.get_by_test_id("node-error-step")).to_contain_text("'action'")
    expect(page.get_by_test_id("run-panel")).to_have_count(0)


def test_unsaved_edits_are_guarded(server: HyloServe, page: Page) -> None:
    asked: list[str] = []

    def answer(accept: bool) -> None:
        """Answer the next dialog: OK when `accept`, else Cancel."""

        def reply(dialog: Dialog) -> None:
            asked.append(dialog.message)
            if accept:
                dialog.accept()
            else:
                dialog.dismiss()

        page.once("dialog", reply)

    open_canvas(page, server, "babyai_expert")
    page.get_by_test_id("rf__edge-reason.chunk->step.action").click()
    page.keyboard.press("Delete")
    expect(page.get_by_test_id("unsaved")).to_be_visible()

    answer(False)  # another graph: declined, the edit stays
    page.get_by_test_id("graph-select").select_option("metaworld_chunked_expert")
    expect(page.get_by_test_id("graph-select")).to_have_value("babyai_expert")
    expect(page.locator(".react-flow__edge")).to_have_count(6)
    answer(False)  # another place of the app: declined
    page.get_by_test_id("nav-runs").click()
    expect(page).to_have_url(re.compile(r"#/canvas/babyai_expert$"))
    expect(page.locator(".react-flow__edge")).to_have_count(6)
    assert len(asked) == 2 and all("not saved" in message for message in asked)

    answer(True)  # accepted: the other graph opens
    page.get_by_test_id("graph-select").select_option("metaworld_chunked_expert")
    expect(page.get_by_test_id("graph-name")).to_have_value("metaworld_chunked_expert")
    expect(page.get_by_test_id("unsaved")).to_have_count(0)
    assert len(asked) == 3

    # leaving the page (closing it) with an edit asks too
    other = page.context.new_page()
    other.goto(server.url + "/#/canvas/babyai_expert")
    other.get_by_test_id("rf__edge-reason.chunk->step.action").click()
    other.keyboard.press("Delete")
    expect(other.get_by_test_id("unsaved")).to_be_visible()
    kinds: list[str] = []

    def leave(dialog: Dialog) -> None:
        kinds.append(dialog.type)
        dialog.accept()

    other.once("dialog", leave)
    other.close(run_before_unload=True)
    deadline = time.monotonic() + 10
    while not kinds and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert kinds == ["beforeunload"]

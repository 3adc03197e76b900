// The env panels of the server and the one in use: the list, the active panel's name (remembered in localStorage)
// and its declaration, state and session, reloaded on demand.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, errorMessage } from "../api";
import { panelPath } from "./EnvPanelForm";
import type { PanelInfo, PanelSummary } from "./types";

export const ACTIVE_PANEL_KEY = "hylo:active_env_panel";

export function usePanelList(): { panels: PanelSummary[] | null; problem: string | null; reload: () => void } {
  const [panels, setPanels] = useState<PanelSummary[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const latest = useRef(0);
  const reload = useCallback(() => {
    const ticket = ++latest.current;
    api<{ panels: PanelSummary[] }>("/api/env-panels")
      .then((answer) => {
        if (ticket !== latest.current) return; // a newer load is on its way: this answer is older than it
        setPanels(answer.panels);
        setProblem(null);
      })
      .catch((error: unknown) => ticket === latest.current && setProblem(errorMessage(error)));
  }, []);
  useEffect(() => {
    reload();
    return () => {
      latest.current++; // the page is gone: no answer is taken any more
    };
  }, [reload]);
  return { panels, problem, reload };
}

/** The active panel: the remembered one while it exists, else the first. */
export function useActivePanel(panels: PanelSummary[] | null): [string | null, (name: string) => void] {
  const [chosen, setChosen] = useState<string | null>(() => localStorage.getItem(ACTIVE_PANEL_KEY));
  const choose = useCallback((name: string) => {
    localStorage.setItem(ACTIVE_PANEL_KEY, name);
    setChosen(name);
  }, []);
  if (!panels) return [chosen, choose];
  const active = panels.some((p) => p.name === chosen) ? chosen : (panels[0]?.name ?? null);
  return [active, choose];
}

export interface PanelData {
  info: PanelInfo | null;
  /** Bumped on every load. */
  revision: number;
  problem: string | null;
  reload: () => Promise<void>;
}

export function usePanelInfo(name: string | null): PanelData {
  const [data, setData] = useState<{ name: string | null; info: PanelInfo | null; revision: number }>({
    name: null,
    info: null,
    revision: 0,
  });
  const [problem, setProblem] = useState<{ name: string; text: string } | null>(null);
  const latest = useRef(0);
  const reload = useCallback(async () => {
    const ticket = ++latest.current;
    if (!name) return;
    try {
      const info = await api<PanelInfo>(panelPath(name));
      if (ticket !== latest.current) return; // a newer load is on its way
      setData((d) => ({ name, info, revision: d.revision + 1 }));
      setProblem(null);
    } catch (error) {
      if (ticket === latest.current) setProblem({ name, text: errorMessage(error) });
    }
  }, [name]);
  useEffect(() => {
    void reload();
    return () => {
      latest.current++; // another panel, or the page is gone: this one's answers are not taken any more
    };
  }, [reload]);
  const info = data.name === name ? data.info : null;
  return { info, revision: data.revision, problem: problem?.name === name ? problem.text : null, reload };
}

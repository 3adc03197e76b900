// The guard on a canvas' unsaved edits: while there are some, leaving the page or following a link to another place
// of the app asks first (the canvas itself asks before it opens another graph, with the same question).
import { useEffect } from "react";

export const DISCARD = "This graph has edits that are not saved. Leave it and lose them?";

/** While `dirty`, leaving the page (closing it, reloading it, another site) or following one of its links (another
 * place of the app) asks first. */
export function useLeaveGuard(dirty: boolean) {
  useEffect(() => {
    if (!dirty) return;
    const warn = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = "";
    };
    const onClick = (event: MouseEvent) => {
      const link = event.target instanceof Element ? event.target.closest("a[href^='#']") : null;
      if (!link || link.getAttribute("href") === location.hash) return;
      if (!window.confirm(DISCARD)) {
        event.preventDefault();
        event.stopPropagation();
      }
    };
    window.addEventListener("beforeunload", warn);
    document.addEventListener("click", onClick, true);
    return () => {
      window.removeEventListener("beforeunload", warn);
      document.removeEventListener("click", onClick, true);
    };
  }, [dirty]);
}

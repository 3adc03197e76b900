// The session's latest camera frame: an <img> of `/frame?n=<number>`, moved to the newest number only when the
// previous image has arrived, so at most one frame request is in flight and frames in between are skipped.
import { useEffect, useRef, useState } from "react";
import { withToken } from "../api";
import type { FrameRef } from "./types";

export function LiveFrame({ frame }: { frame: FrameRef | null }) {
  const [shown, setShown] = useState<FrameRef | null>(null);
  const loading = useRef(false);
  const latest = useRef<FrameRef | null>(frame);
  latest.current = frame;

  useEffect(() => {
    if (!frame) {
      loading.current = false;
      setShown(null);
      return;
    }
    if (!loading.current && frame.url !== shown?.url) {
      loading.current = true;
      setShown(frame);
    }
  }, [frame, shown]);

  const settled = () => {
    loading.current = false;
    const next = latest.current;
    if (next && next.url !== shown?.url) {
      loading.current = true;
      setShown(next);
    }
  };

  if (!shown) return <div className="live-frame empty muted">no frame yet</div>;
  return (
    <figure className="live-frame">
      <img
        data-testid="live-frame"
        data-frame-number={shown.number}
        src={withToken(shown.url)}
        alt={`frame ${shown.number} (step ${shown.step}, camera ${shown.camera})`}
        onLoad={settled}
        onError={settled}
      />
      <figcaption className="muted">
        {shown.camera} · frame {shown.number} · step {shown.step}
      </figcaption>
    </figure>
  );
}

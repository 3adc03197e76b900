// The one way the UI talks to `hylo serve`: JSON over fetch, the bearer token when the server wants one, and
// errors turned into readable messages (FastAPI's `{"detail": ...}` in its string, list and per-node shapes).

const TOKEN_KEY = "hylo:token";

export function getToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** The token in the URL `hylo serve` prints (`http://127.0.0.1:8765/#token=...`), taken once: kept in this origin's
 * storage and removed from the address bar and the page's history entry, before anything reads the route. It comes
 * in the fragment, which a browser never sends: no server's or proxy's log sees it. */
export function takeTokenFromAddress(): void {
  const match = /^#token=([^&]+)$/.exec(location.hash);
  if (!match) return;
  let token: string;
  try {
    token = decodeURIComponent(match[1]);
  } catch {
    return;
  }
  setToken(token);
  history.replaceState(history.state, "", location.pathname + location.search);
}

/** A failed request: `status` is the HTTP status (0 when the server could not be reached), `message` is readable,
 * `detail` is the server's `detail` as sent. */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: unknown;

  constructor(status: number, message: string, detail: unknown) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
  }
}

/** Listeners told when the server answers 401 (the token is missing or wrong). */
const unauthorizedListeners = new Set<() => void>();

export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** A readable line for a FastAPI `detail`: a string as is; a validation list as `field: message; ...`; a graph's
 * per-node list as `node: message; ...`. */
export function describeDetail(detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item) => {
        if (item && typeof item === "object") {
          const entry = item as Record<string, unknown>;
          const message = String(entry.msg ?? entry.message ?? JSON.stringify(entry));
          if (entry.node) return `${String(entry.node)}: ${message}`;
          if (Array.isArray(entry.loc)) {
            const where = entry.loc.filter((part) => part !== "body").join(".");
            return where ? `${where}: ${message}` : message;
          }
          return message;
        }
        return String(item);
      })
      .join("; ");
  }
  if (detail && typeof detail === "object") {
    const entry = detail as Record<string, unknown>;
    if (typeof entry.message === "string") return entry.message;
    return JSON.stringify(detail);
  }
  return String(detail);
}

/** `path` with the token as `access_token`, for the places a browser cannot send a header (img, video, websocket). */
export function withToken(path: string): string {
  const token = getToken();
  if (!token) return path;
  const sep = path.includes("?") ? "&" : "?";
  return `${path}${sep}access_token=${encodeURIComponent(token)}`;
}

/** The websocket URL of an API path on this page's server. */
export function wsUrl(path: string): string {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return withToken(`${proto}//${location.host}${path}`);
}

export async function api<T>(path: string, init: RequestInit & { json?: unknown } = {}): Promise<T> {
  const headers = new Headers(init.headers);
  const token = getToken();
  if (token) headers.set("Authorization", `Bearer ${token}`);
  let body = init.body;
  if (init.json !== undefined) {
    headers.set("Content-Type", "application/json");
    body = JSON.stringify(init.json);
  }
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers, body });
  } catch (error) {
    throw new ApiError(0, `the server could not be reached (${String(error)})`, null);
  }
  const text = await response.text();
  let data: unknown = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    if (response.status === 401) unauthorizedListeners.forEach((listener) => listener());
    const detail = data && typeof data === "object" && "detail" in data ? (data as { detail: unknown }).detail : data;
    const message = detail ? describeDetail(detail) : response.statusText;
    throw new ApiError(response.status, `${response.status}: ${message}`, detail);
  }
  return data as T;
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

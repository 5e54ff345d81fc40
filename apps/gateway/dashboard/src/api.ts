/** The /v1 API with the user's bearer token; failures become ApiError with the gateway's message. */

const KEY = "switchyard.token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The token lives for the tab (sessionStorage) unless the user asked to be remembered on this device. */
export function savedToken(): string | null {
  return sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY);
}

export function saveToken(token: string, remember: boolean): void {
  forgetToken();
  (remember ? localStorage : sessionStorage).setItem(KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

export function authHeaders(): Record<string, string> {
  const token = savedToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export async function api<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders() };
  if (init.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/v1${path}`, {
    method: init.method ?? "GET",
    headers,
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    ...(init.signal ? { signal: init.signal } : {}),
  });
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const message = (body as { error?: { message?: string } } | undefined)?.error?.message ?? `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return body as T;
}

export const q = (queue: string) => `/queues/${encodeURIComponent(queue)}`;
export const jobPath = (queue: string, id: string) => `${q(queue)}/jobs/${encodeURIComponent(id)}`;

import { useEffect, useRef, useState } from "preact/hooks";
import { saveToken } from "../api.js";

/** Asks for a bearer token when the gateway has tokens configured; kept for this tab unless remembered. */
export function TokenForm({ problem, onSaved }: { problem: string | null; onSaved: () => void }) {
  const [token, setToken] = useState("");
  const [remember, setRemember] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  return (
    <form
      class="panel token-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (!token.trim()) return;
        saveToken(token.trim(), remember);
        onSaved();
      }}
    >
      <h1>Sign in</h1>
      <p>This gateway needs a bearer token (one of its configured `auth.tokens`).</p>
      {problem && (
        <p class="notice notice-error" role="alert">
          {problem}
        </p>
      )}
      <label class="field">
        Token
        <input
          ref={input}
          type="password"
          name="token"
          autocomplete="current-password"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
      </label>
      <label class="check">
        <input type="checkbox" checked={remember} onChange={(e) => setRemember((e.target as HTMLInputElement).checked)} /> Remember on this
        device
      </label>
      <button type="submit" class="button primary">
        Open dashboard
      </button>
    </form>
  );
}

/** A one-line status or error; its space is always kept so that the page below it does not jump. */
export function Notice({ message }: { message: { text: string; error?: boolean } | null }) {
  return (
    <p class={`notice${message?.error ? " notice-error" : ""}`} role={message?.error ? "alert" : "status"} aria-live="polite">
      {message?.text ?? ""}
    </p>
  );
}

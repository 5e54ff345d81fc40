import { useEffect, useRef, useState } from "preact/hooks";

/** A button that asks once more, in place, before it does something that cannot be undone. */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  busy,
}: { label: string; question: string; confirmLabel: string; onConfirm: () => void; busy?: boolean }) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button type="button" class="button danger" disabled={busy} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  return (
    <fieldset class="confirm">
      <legend class="visually-hidden">{question}</legend>
      <span aria-hidden="true">{question}</span>
      <button
        ref={yes}
        type="button"
        class="button danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" class="button" onClick={() => setAsking(false)} onKeyDown={(e) => e.key === "Escape" && setAsking(false)}>
        Keep
      </button>
    </fieldset>
  );
}

/**
 * Typed errors with stable codes. Backends throw them; only the gateway maps them to HTTP,
 * in one place (`httpStatusOf` there), so every door answers the same failure the same way.
 */
export type ErrorCode = "VALIDATION" | "NOT_FOUND" | "LEASE_LOST" | "UNSUPPORTED" | "CONFLICT" | "INVALID_STATE" | "BACKEND_UNAVAILABLE";

export class SwitchyardError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
}

/** Input that does not fit the job model or a protocol's rules. */
export class ValidationError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("VALIDATION", message, details);
  }
}

/** No job (or queue) with that id. */
export class NotFoundError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("NOT_FOUND", message, details);
  }
}

/** The caller no longer holds the job's lease: it expired and moved on, or another worker has it. */
export class LeaseLostError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("LEASE_LOST", message, details);
  }
}

/** The backend cannot honour this operation or option; never downgraded silently. */
export class UnsupportedError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("UNSUPPORTED", message, details);
  }
}

/** A job with that id already exists where the caller asked for a new one. */
export class ConflictError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("CONFLICT", message, details);
  }
}

/** The job exists but is in a state that does not allow the operation (completing a waiting job...). */
export class InvalidStateError extends SwitchyardError {
  constructor(message: string, details?: Record<string, unknown>) {
    super("INVALID_STATE", message, details);
  }
}

/** The storage server could not be reached or refused the operation. */
export class BackendUnavailableError extends SwitchyardError {
  constructor(message: string, options?: ErrorOptions) {
    super("BACKEND_UNAVAILABLE", message, undefined, options);
  }
}

export function isSwitchyardError(error: unknown): error is SwitchyardError {
  return error instanceof SwitchyardError;
}

// The one error this module throws. Everything that reaches it is untrusted
// request input, so a failure here always means "the sender got it wrong":
// functions answer 400 with the message, and never retry.

export class EnvelopeError extends Error {
  /** The HTTP status a function should answer with. */
  readonly status = 400;

  constructor(message: string) {
    super(message);
    this.name = "EnvelopeError";
  }
}

/** Prefixes an EnvelopeError's message with where it happened (e.g. "batch event 2"). */
export function withContext<T>(context: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof EnvelopeError) throw new EnvelopeError(`${context}: ${err.message}`);
    throw err;
  }
}

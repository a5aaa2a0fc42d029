// Errors a table request can end with. The HTTP layer sends them as `{"reason": message}` with
// the status the Weave service uses for the same condition.

export class TableRequestError extends Error {
  constructor(
    readonly statusCode: 400 | 404 | 409,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** Unknown base table (the service's NotFoundError → 404). */
export function tableNotFound(projectId: string, digest: string): TableRequestError {
  return new TableRequestError(404, `Table ${projectId}:${digest} not found`);
}

/** Client-computed digest differs from ours (the service's DigestMismatchError → 409). */
export function digestMismatch(expected: string, actual: string): TableRequestError {
  return new TableRequestError(409, `Digest mismatch: expected ${expected}, computed ${actual}`);
}

/** The service's InvalidRequest / ValueError → 400. */
export function invalidRequest(reason: string): TableRequestError {
  return new TableRequestError(400, reason);
}

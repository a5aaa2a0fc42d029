// Row and table digests, exactly as the Weave service computes them.
//   row digest   = sha256(json.dumps(row, sort_keys=True)) → urlsafe base64, '-'→'X', '_'→'Y', no '='
//   table digest = hex sha256 over the concatenated row digests in table order

import { createHash } from 'node:crypto';
import { COMPACT_JSON, DIGEST_JSON, pythonJsonDumps } from './python-json.js';

/** sha256 of nothing: the digest of a table with no rows. */
export const EMPTY_TABLE_DIGEST = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** The exact text the service hashes for a row (lossless-json value). */
export function canonicalRowText(row: unknown): string {
  return pythonJsonDumps(row, DIGEST_JSON);
}

/** Digest of already-canonical text (see canonicalRowText). */
export function digestOfCanonicalText(text: string): string {
  const b64 = createHash('sha256').update(text, 'utf8').digest('base64url');
  // base64url has no '=' padding; the service then maps '-' and '_' to letters.
  return b64.replace(/-/g, 'X').replace(/_/g, 'Y');
}

export function rowDigest(row: unknown): string {
  return digestOfCanonicalText(canonicalRowText(row));
}

/** Table digest of a complete list (for incremental digests see TableStore). */
export function tableDigest(rowDigests: Iterable<string>): string {
  const hash = createHash('sha256');
  // The service feeds each digest's UTF-8 bytes; digests from create_from_digests may be any string.
  for (const digest of rowDigests) hash.update(digest, 'utf8');
  return hash.digest('hex');
}

/** A row ready to store: its digest and the JSON text it is returned as (key order kept). */
export interface PreparedRow {
  digest: string;
  valJson: string;
}

export function prepareRow(row: Record<string, unknown>): PreparedRow {
  return { digest: rowDigest(row), valJson: pythonJsonDumps(row, COMPACT_JSON) };
}

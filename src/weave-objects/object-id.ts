// Object ids (names) as the Weave trace server accepts them (weave/trace_server/validation.py):
// word characters (Python's Unicode \w: letters, digits, underscore), '.', '-' only, 1–128 characters.
// The service answers a bad name with InvalidFieldError, which its error mapping sends as 403.

const INVALID_NAME_CHARS = /[^\p{L}\p{N}_.-]/gu;
export const MAX_OBJECT_ID_LENGTH = 128;

/** Why `objectId` is refused, in the service's words, or null when it is valid. */
export function objectIdProblem(objectId: string): string | null {
  const invalid = objectId.match(INVALID_NAME_CHARS);
  if (invalid) {
    const chars = [...new Set(invalid)].map((c) => `'${c}'`).join(', ');
    return `Invalid object name: ${objectId}. Contains invalid characters: [${chars}].`;
  }
  if (objectId.length === 0) return 'Object name cannot be empty';
  // Python counts code points, not UTF-16 units.
  const length = [...objectId].length;
  if (length > MAX_OBJECT_ID_LENGTH) return `String too long (${length} > ${MAX_OBJECT_ID_LENGTH})`;
  return null;
}

// An /obj/create value as the Weave trace server stores it (weave/shared/digest.py
// compute_object_digest_result): the digest is the one tables use for rows, sha256 of
// `json.dumps(val, sort_keys=True)` in base64url with '-'→'X', '_'→'Y' and no padding, over the value
// exactly as Python's json.loads saw it (so the body is parsed losslessly: 1.0 and 1 differ).

import { invalid, notImplemented } from '../errors/domain-errors.js';
import { rowDigest } from '../tables/digest.js';
import { COMPACT_JSON, pythonJsonDumps } from '../tables/python-json.js';
import { objectClassesOf, objectKindOf } from './object-classes.js';
import type { PreparedObject } from './object-store.js';

/**
 * Digest and classes of `val`. A `builtin_object_class` asks the service to validate the value against
 * its own registry of object classes (Leaderboard, Model, …), which Hearth does not have: accepted only
 * when the value already names that class (the service then stores it unchanged), 501 otherwise.
 */
export function prepareObject(val: unknown, builtinObjectClass: string | null | undefined): PreparedObject {
  const classes = objectClassesOf(val);
  if (builtinObjectClass != null) {
    if (typeof val !== 'object' || val === null || Array.isArray(val)) {
      throw invalid('object_class cannot be provided for non-dict objects');
    }
    if (!classes) {
      throw notImplemented(
        `builtin_object_class '${builtinObjectClass}' needs server-side validation against Weave's object class registry, which Hearth does not host; send the value with its _class_name and _bases`,
      );
    }
    if (classes.leafObjectClass !== builtinObjectClass) {
      throw invalid(`object_class must match val's defined object class: ${classes.leafObjectClass} != ${builtinObjectClass}`);
    }
  }
  return {
    digest: rowDigest(val),
    valJson: pythonJsonDumps(val, COMPACT_JSON),
    kind: objectKindOf(val),
    baseObjectClass: classes?.baseObjectClass ?? null,
    leafObjectClass: classes?.leafObjectClass ?? null,
  };
}

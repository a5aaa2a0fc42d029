// The `project_id` of the Weave routes (tables, objects): `<entity>/<project>`, owned by the key's entity.
// Another entity's projects do not exist for the caller (404 or an empty answer, never 403).
import type { AuthContext } from './route.js';
import { HttpError } from './errors.js';
import type { ProjectScope } from '../tables/table-store.js';
import { TableRequestError } from '../tables/errors.js';
import { PythonJsonError } from '../tables/python-json.js';

/** Why the caller may not see a project: it belongs to another entity than the key's. */
export class ForeignProject extends Error {}

/** `entity/project` → scope; throws 400 on a malformed id and ForeignProject for another entity's. */
export function weaveProjectScope(auth: AuthContext, projectId: string): ProjectScope {
  const slash = projectId.indexOf('/');
  if (slash <= 0 || slash === projectId.length - 1) {
    throw new HttpError(400, `Invalid project_id '${projectId}': expected '<entity>/<project>'`);
  }
  const scope = { entity: projectId.slice(0, slash), project: projectId.slice(slash + 1) };
  if (scope.entity !== auth.entity) throw new ForeignProject();
  return scope;
}

/** A table or object store error as the trace server answers it (`{"reason"}`); other errors as they are. */
function weaveHttpError(error: unknown): unknown {
  if (error instanceof TableRequestError) return new HttpError(error.statusCode, error.reason);
  // Python's json.loads refuses what we refuse here (e.g. integers over 4300 digits) with a 400.
  if (error instanceof PythonJsonError) return new HttpError(400, `There was an error parsing the body: ${error.message}`);
  return error;
}

/**
 * Run a Weave table or object operation: store errors become `{"reason"}` responses, and another entity's project
 * answers as `whenForeign` says (404 or an empty answer).
 */
export function runInProject<T>(operation: () => T, whenForeign: () => T): T {
  try {
    return operation();
  } catch (error) {
    if (error instanceof ForeignProject) return whenForeign();
    throw weaveHttpError(error);
  }
}

/** runInProject for an operation that yields to the event loop (large tables); the project is resolved before it. */
export async function runInProjectAsync<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw weaveHttpError(error);
  }
}

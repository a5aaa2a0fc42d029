// The `project_id` of the Weave routes (tables, objects): `<entity>/<project>`, owned by the key's entity.
// Another entity's projects do not exist for the caller (404 or an empty answer, never 403).
import type { AuthContext } from './route.js';
import { HttpError } from './errors.js';
import type { ProjectScope } from '../tables/table-store.js';

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

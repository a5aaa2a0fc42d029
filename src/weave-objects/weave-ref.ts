// Weave ref URIs as clients send them (weave/trace/refs.py, weave/shared/refs_internal.py):
//   weave:///<entity>/<project>/object/<name>:<digest>[/<edge>/<arg>]...
//   weave:///<entity>/<project>/op/<name>:<digest>[/<edge>/<arg>]...
//   weave:///<entity>/<project>/table/<digest>
// Edges walk into the value: `key` (dict key), `attr` (object attribute), `index` (list index) and
// `id` (a row of the table the value refers to, by row digest). Path parts are percent-encoded.

export const WEAVE_REF_PREFIX = 'weave:///';
export const EDGE_NAMES = ['key', 'attr', 'index', 'id'] as const;
export type EdgeName = (typeof EDGE_NAMES)[number];

export interface RefEdge {
  edge: EdgeName;
  arg: string;
}

export type WeaveRef =
  | { kind: 'object' | 'op'; entity: string; project: string; name: string; digest: string; extra: RefEdge[] }
  | { kind: 'table'; entity: string; project: string; digest: string };

export class InvalidRefError extends Error {}

function decodePart(part: string, uri: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new InvalidRefError(`Invalid ref: ${uri} (bad percent-encoding)`);
  }
}

function isEdgeName(value: string): value is EdgeName {
  return (EDGE_NAMES as readonly string[]).includes(value);
}

/** Parse a `weave:///` URI; throws InvalidRefError naming what is wrong. */
export function parseWeaveRef(uri: string): WeaveRef {
  if (!uri.startsWith(WEAVE_REF_PREFIX)) throw new InvalidRefError(`Invalid ref: ${uri} (expected ${WEAVE_REF_PREFIX}…)`);
  const parts = uri.slice(WEAVE_REF_PREFIX.length).split('/');
  if (parts.length < 4) throw new InvalidRefError(`Invalid ref: ${uri} (expected entity/project/kind/name)`);
  const [entityPart, projectPart, kind, namePart, ...rest] = parts;
  const entity = decodePart(entityPart, uri);
  const project = decodePart(projectPart, uri);
  if (!entity || !project) throw new InvalidRefError(`Invalid ref: ${uri} (empty entity or project)`);
  if (kind === 'table') {
    if (rest.length > 0 || !namePart) throw new InvalidRefError(`Invalid ref: ${uri} (a table ref is …/table/<digest>)`);
    return { kind, entity, project, digest: decodePart(namePart, uri) };
  }
  if (kind !== 'object' && kind !== 'op') throw new InvalidRefError(`Invalid ref: ${uri} (unknown kind '${kind}')`);
  const colon = namePart.lastIndexOf(':');
  if (colon <= 0 || colon === namePart.length - 1) throw new InvalidRefError(`Invalid ref: ${uri} (expected <name>:<digest>)`);
  if (rest.length % 2 !== 0) throw new InvalidRefError(`Invalid ref: ${uri} (extra path must be <edge>/<value> pairs)`);
  const extra: RefEdge[] = [];
  for (let i = 0; i < rest.length; i += 2) {
    const edge = rest[i];
    if (!isEdgeName(edge)) throw new InvalidRefError(`Invalid ref: ${uri} (unknown edge '${edge}')`);
    extra.push({ edge, arg: decodePart(rest[i + 1], uri) });
  }
  return {
    kind,
    entity,
    project,
    name: decodePart(namePart.slice(0, colon), uri),
    digest: decodePart(namePart.slice(colon + 1), uri),
    extra,
  };
}

// Training data locations an SFT job may name:
//   file:///abs/path.jsonl                               a file on the server
//   wandb-artifact:///<entity>/<project>/<name>:<version> a dataset uploaded to Hearth (the hosted artifact store does not exist offline)
//   weave:///<entity>/<project>/table/<digest>            a Hearth table whose rows are {messages, tools?}
import path from 'node:path';
import { parseWeaveRef, WEAVE_REF_PREFIX } from '../weave-objects/weave-ref.js';

export type DataUrl =
  | { scheme: 'file'; path: string }
  | { scheme: 'dataset'; entity: string; project: string; name: string; version: string }
  | { scheme: 'table'; entity: string; project: string; digest: string };

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export function parseDataUrl(url: string): DataUrl | { error: string } {
  if (url.startsWith('file://')) {
    const p = decodeURIComponent(url.slice('file://'.length));
    if (!path.isAbsolute(p)) return { error: `file URL must hold an absolute path: ${url}` };
    return { scheme: 'file', path: path.normalize(p) };
  }
  const artifact = /^wandb-artifact:\/\/\/?([^/]+)\/([^/]+)\/([^/:]+)(?::([^/:]+))?$/.exec(url);
  if (artifact) {
    const [, entity, project, name, version = 'latest'] = artifact;
    if (![entity, project, name, version].every((s) => SEGMENT.test(s))) return { error: `malformed dataset URL: ${url}` };
    return { scheme: 'dataset', entity, project, name, version };
  }
  const table = weaveTableRef(url);
  if (table) {
    const { entity, project, digest } = table;
    if (![entity, project].every((s) => SEGMENT.test(s))) return { error: `malformed table URL: ${url}` };
    return { scheme: 'table', entity, project, digest };
  }
  return { error: `unsupported training_data_url "${url}": use file:///…, wandb-artifact:///<entity>/<project>/<name>:<version> or weave:///<entity>/<project>/table/<digest>` };
}

/** Table digests are base64url with `-`→`X`, `_`→`Y`: letters and digits only (the snapshot's file name). */
const TABLE_DIGEST = /^[A-Za-z0-9]+$/;

/**
 * The table a `weave:///…/table/<digest>` URL names, or null for anything else (other Weave refs too).
 * Like the `wandb-artifact` form, two slashes after the scheme are taken as three.
 */
function weaveTableRef(url: string): { entity: string; project: string; digest: string } | null {
  if (!url.startsWith('weave://')) return null;
  const uri = url.startsWith(WEAVE_REF_PREFIX) ? url : WEAVE_REF_PREFIX + url.slice('weave://'.length);
  try {
    const ref = parseWeaveRef(uri);
    return ref.kind === 'table' && TABLE_DIGEST.test(ref.digest) ? ref : null;
  } catch {
    return null;
  }
}

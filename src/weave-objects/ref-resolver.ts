// /refs/read_batch: the value each ref points at, walking its extra path (weave's sqlite trace server
// refs_read_batch). Object and op refs only; table refs answer 400 as the service's does. Refs into
// another entity's projects are not found, as every other resource of that entity.

import { invalid, notFound } from '../errors/domain-errors.js';
import { parseLosslessJson } from '../tables/lossless-parse.js';
import { COMPACT_JSON, pythonJsonDumps } from '../tables/python-json.js';
import type { ProjectScope, TableStore } from '../tables/table-store.js';
import type { ObjectStore } from './object-store.js';
import { InvalidRefError, parseWeaveRef, WEAVE_REF_PREFIX, type RefEdge } from './weave-ref.js';

export const MAX_REFS_PER_BATCH = 1000;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}

export class RefResolver {
  constructor(
    private readonly objects: ObjectStore,
    private readonly tables: TableStore,
    /** The entity of the caller's key: refs elsewhere do not exist for it. */
    private readonly entity: string,
  ) {}

  /** The JSON text of each ref's value, in order. */
  readBatch(refs: readonly string[]): string[] {
    if (refs.length > MAX_REFS_PER_BATCH) throw invalid('Too many refs');
    return refs.map((uri) => pythonJsonDumps(this.read(uri), COMPACT_JSON));
  }

  private read(uri: string): unknown {
    let ref;
    try {
      ref = parseWeaveRef(uri);
    } catch (error) {
      if (error instanceof InvalidRefError) throw invalid(error.message);
      throw error;
    }
    if (ref.kind === 'table') throw invalid('Table refs not supported');
    const scope = { entity: ref.entity, project: ref.project };
    const stored = ref.entity === this.entity ? this.objects.read(scope, ref.name, ref.digest) : undefined;
    if (!stored) throw notFound(`Obj ${ref.name}:${ref.digest} not found`);
    let value = parseLosslessJson(stored.valJson);
    for (const step of ref.extra) value = this.walk(value, step, uri);
    return value;
  }

  private walk(value: unknown, step: RefEdge, uri: string): unknown {
    switch (step.edge) {
      case 'key':
      case 'attr':
        if (!isRecord(value) || !Object.hasOwn(value, step.arg)) throw notFound(`Ref ${uri}: no ${step.edge} '${step.arg}'`);
        return value[step.arg];
      case 'index': {
        if (!/^\s*[+-]?\d+\s*$/.test(step.arg)) throw invalid(`Ref ${uri}: index '${step.arg}' is not an integer`);
        if (!Array.isArray(value)) throw notFound(`Ref ${uri}: index ${step.arg} into a value that is not a list`);
        const index = Number(step.arg);
        // Python's val[int(arg)]: negative indexes count from the end.
        const position = index < 0 ? value.length + index : index;
        if (position < 0 || position >= value.length) throw notFound(`Ref ${uri}: index ${step.arg} out of range`);
        return value[position];
      }
      case 'id':
        return this.tableRow(value, step.arg, uri);
    }
  }

  /** `id/<row digest>` applies to a value that is a table ref: the row of that table's project. */
  private tableRow(value: unknown, rowDigest: string, uri: string): unknown {
    if (typeof value !== 'string' || !value.startsWith(WEAVE_REF_PREFIX)) {
      throw invalid(`Ref ${uri}: invalid data layout encountered, expected TableRef when resolving id`);
    }
    let table;
    try {
      table = parseWeaveRef(value);
    } catch {
      table = null;
    }
    if (!table || table.kind !== 'table') throw invalid(`Ref ${uri}: invalid data layout encountered, expected TableRef when resolving id`);
    const scope: ProjectScope = { entity: table.entity, project: table.project };
    const valJson = table.entity === this.entity ? this.tables.readRow(scope, rowDigest) : undefined;
    if (valJson === undefined) throw notFound(`Row ${rowDigest} not found`);
    return parseLosslessJson(valJson);
  }
}

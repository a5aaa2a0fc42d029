// /refs/read_batch: the value each ref points at, walking its extra path (weave's sqlite trace server
// refs_read_batch). Object and op refs only; table refs answer 400 as the service's does. Refs into
// another entity's projects are not found, as every other resource of that entity.

import { DomainError, invalid, notFound } from '../errors/domain-errors.js';
import { parseLosslessJson } from '../tables/lossless-parse.js';
import { COMPACT_JSON, pythonJsonDumps } from '../tables/python-json.js';
import type { ProjectScope, TableStore } from '../tables/table-store.js';
import type { ObjectStore } from './object-store.js';
import { InvalidRefError, parseWeaveRef, WEAVE_REF_PREFIX, type RefEdge } from './weave-ref.js';

export const MAX_REFS_PER_BATCH = 1000;
/**
 * Most characters of JSON one batch may answer: a thousand refs to one 5 MB object of the caller's own would
 * otherwise build a 5 GB answer. Python's service has no such cap; its clients read refs a few at a time.
 */
export const MAX_REFS_BATCH_ANSWER_CHARS = 64 * 1024 * 1024;

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

  /**
   * The JSON text of each ref's value, in order. Each distinct ref is resolved once and each stored object parsed
   * once (refs repeat, and several refs may point into one object); the answer's size is capped.
   */
  readBatch(refs: readonly string[], maxAnswerChars: number = MAX_REFS_BATCH_ANSWER_CHARS): string[] {
    if (refs.length > MAX_REFS_PER_BATCH) throw invalid('Too many refs');
    const texts = new Map<string, string>();
    const parsed = new Map<string, unknown>();
    let chars = 0;
    return refs.map((uri) => {
      let text = texts.get(uri);
      if (text === undefined) {
        text = pythonJsonDumps(this.read(uri, parsed), COMPACT_JSON);
        texts.set(uri, text);
      }
      chars += text.length + 1;
      if (chars > maxAnswerChars) throw new DomainError('too_large', `The values of these refs exceed ${maxAnswerChars} characters of JSON in one answer: read them in smaller batches`);
      return text;
    });
  }

  /** `parsed`: stored objects parsed so far in this batch, by project, name and digest. */
  private read(uri: string, parsed: Map<string, unknown>): unknown {
    let ref;
    try {
      ref = parseWeaveRef(uri);
    } catch (error) {
      if (error instanceof InvalidRefError) throw invalid(error.message);
      throw error;
    }
    if (ref.kind === 'table') throw invalid('Table refs not supported');
    const scope = { entity: ref.entity, project: ref.project };
    const objectKey = JSON.stringify([ref.project, ref.name, ref.digest]);
    if (!parsed.has(objectKey)) {
      const stored = ref.entity === this.entity ? this.objects.read(scope, ref.name, ref.digest) : undefined;
      if (!stored) throw notFound(`Obj ${ref.name}:${ref.digest} not found`);
      parsed.set(objectKey, parseLosslessJson(stored.valJson));
    }
    let value = parsed.get(objectKey);
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

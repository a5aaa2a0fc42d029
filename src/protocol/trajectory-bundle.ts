// ART's TrajectoryGroupBundle (what an RL forward_backward of the native training-runs API carries) decoded into
// the trajectory groups Hearth's RL trainer takes (the preview API's `trajectory_groups`). Pure: no I/O.
//
// What ART writes (docs/art.md "RL batches: the bundle encoding", art/distributed/trajectory_store.py and
// packing.py): `header` is the msgpack of TrajectoryGroupPayload.model_dump(mode="python") with `trajectories`
// emptied; each of `records` is the msgpack of one TrajectoryPayload.model_dump(mode="python"), whose `payload` is
// the Trajectory as model_dump(mode="json"). In a JSON body the bytes travel as base64 (ART's trajectory contracts
// set ser_json_bytes="base64": pydantic writes the URL-safe alphabet with padding). Decoding follows ART's own
// `TrajectoryGroupBundle.payload()` and `build()`: unknown fields are refused (extra="forbid"), absent ones take
// their defaults, choice positions must point at Choices, per-history lists must line up with the histories.
import { decode } from '@msgpack/msgpack';
import { z } from 'zod';
import { notImplemented, ValidationError, type ValidationIssue } from '../errors/domain-errors.js';
import { Trajectory, type TrajectoryGroupT } from './training.js';

export interface TrajectoryGroupBundleJson {
  header: string;
  records: string[];
}

const STANDARD_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const URL_SAFE_BASE64 = /^[A-Za-z0-9_-]*={0,2}$/;

/** Bytes of base64 text in either alphabet (standard or URL-safe), padded or not; a reason when it is not base64. */
export function decodeBase64(text: string): Uint8Array | { error: string } {
  if (!STANDARD_BASE64.test(text) && !URL_SAFE_BASE64.test(text)) {
    return { error: 'not base64: bytes travel as base64 text (standard or URL-safe alphabet, as pydantic\'s ser_json_bytes="base64" writes them)' };
  }
  const body = text.replace(/=+$/, '');
  if (body.length % 4 === 1) return { error: 'truncated base64 (a final group of one character)' };
  if (body.length !== text.length && text.length % 4 !== 0) return { error: 'base64 padding does not fill the last group' };
  return new Uint8Array(Buffer.from(body.replace(/-/g, '+').replace(/_/g, '/'), 'base64'));
}

const MetadataValue = z.union([z.number(), z.string(), z.boolean(), z.null()]);
const MetricValue = z.union([z.number(), z.boolean()]);

/** TrajectoryGroupPayload without its trajectories (they travel as the records). */
const GroupHeader = z.strictObject({
  trajectories: z.array(z.unknown()).max(0, 'the header carries no trajectories (they are the records)').optional(),
  // PydanticException dumped as a dict: type, message and traceback (build() validates them).
  exceptions: z.array(z.object({ type: z.string(), message: z.string(), traceback: z.string() }).catchall(z.string())).optional(),
  metadata: z.record(z.string(), MetadataValue).optional(),
  metrics: z.record(z.string(), MetricValue).optional(),
  logs: z.array(z.string()).optional(),
  collect_packing_shape: z.boolean().optional(),
});

const Positions = z.array(z.number().int().min(0));
/** MoE routing of a Choice, by position (newer ART versions): Hearth trains dense models and takes none. */
const Routing = z.record(z.string(), z.unknown());

/** TrajectoryPayload: one trajectory and where its Choices are. */
const TrajectoryRecord = z.strictObject({
  payload: z.record(z.string(), z.unknown()),
  choice_positions: Positions.optional(),
  additional_history_choice_positions: z.array(Positions).optional(),
  choice_routing_metadata: Routing.optional(),
  additional_history_choice_routing_metadata: z.array(Routing).optional(),
  exchange_choice_routing_metadata: z.array(Routing).optional(),
});

type Loc = (string | number)[];

/** Values JSON can carry (msgpack can also carry bytes, extension types, non-finite floats): the path of the first other one. */
function firstNonJson(value: unknown, path: Loc): Loc | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = firstNonJson(value[i], [...path, i]);
      if (at) return at;
    }
    return null;
  }
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    for (const [k, v] of Object.entries(value)) {
      const at = firstNonJson(v, [...path, k]);
      if (at) return at;
    }
    return null;
  }
  return path;
}

/** A Choice as ART dumps it (openai's Choice: message and finish_reason), not a chat message (role). */
function isChoice(item: unknown): boolean {
  return !!item && typeof item === 'object' && 'message' in item && 'finish_reason' in item && !('role' in item);
}

class Refusal extends Error {
  constructor(readonly issue: ValidationIssue) {
    super(issue.msg);
  }
}

const refuse = (loc: Loc, msg: string): never => {
  throw new Refusal({ loc, msg, type: 'value_error' });
};

/** base64 → msgpack → a value JSON can carry, or a refusal at `loc`. */
function unpack(text: string, loc: Loc): unknown {
  const bytes = decodeBase64(text);
  if ('error' in bytes) return refuse(loc, bytes.error);
  let value: unknown;
  try {
    value = decode(bytes);
  } catch (err) {
    return refuse(loc, `not one msgpack value: ${(err as Error).message}`);
  }
  const odd = firstNonJson(value, []);
  if (odd) refuse([...loc, ...odd], 'msgpack value JSON cannot carry (bytes, an extension type or a non-finite number)');
  return value;
}

function parseWith<T extends z.ZodType>(schema: T, value: unknown, loc: Loc): z.output<T> {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0];
    refuse([...loc, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))], issue.message);
  }
  return r.data as z.output<T>;
}

/** Choice positions point at Choices, and the per-history lists have one entry per history (ART's build() zips them strictly). */
function checkRecord(record: z.output<typeof TrajectoryRecord>, trajectory: z.output<typeof Trajectory>, loc: Loc): void {
  const items = trajectory.messages_and_choices;
  for (const [i, p] of (record.choice_positions ?? []).entries()) {
    if (p >= items.length || !isChoice(items[p])) refuse([...loc, 'choice_positions', i], `position ${p} of messages_and_choices is not a Choice`);
  }
  const histories = trajectory.additional_histories;
  const positions = record.additional_history_choice_positions ?? [];
  if (positions.length !== histories.length) {
    refuse([...loc, 'additional_history_choice_positions'], `has ${positions.length} entries for ${histories.length} additional histories`);
  }
  positions.forEach((list, h) => list.forEach((p, i) => {
    if (p >= histories[h].messages_and_choices.length || !isChoice(histories[h].messages_and_choices[p])) {
      refuse([...loc, 'additional_history_choice_positions', h, i], `position ${p} of additional history ${h} is not a Choice`);
    }
  }));
  const historyRouting = record.additional_history_choice_routing_metadata;
  if (historyRouting && historyRouting.length !== histories.length) {
    refuse([...loc, 'additional_history_choice_routing_metadata'], `has ${historyRouting.length} entries for ${histories.length} additional histories`);
  }
  const exchanges = (trajectory as { exchanges?: { chat_completions?: unknown[] } }).exchanges;
  const exchangeRouting = record.exchange_choice_routing_metadata;
  if (exchangeRouting && exchangeRouting.length !== (exchanges?.chat_completions?.length ?? 0)) {
    refuse([...loc, 'exchange_choice_routing_metadata'], `has ${exchangeRouting.length} entries for ${exchanges?.chat_completions?.length ?? 0} chat-completion exchanges`);
  }
}

/** Well-formed input Hearth's trainer cannot honour (501, naming where). */
function unsupported(record: z.output<typeof TrajectoryRecord>, trajectory: z.output<typeof Trajectory>, where: string): string | null {
  const routed = [record.choice_routing_metadata ?? {}, ...(record.additional_history_choice_routing_metadata ?? []), ...(record.exchange_choice_routing_metadata ?? [])];
  if (routed.some((r) => Object.keys(r).length > 0)) return `${where} carries MoE routing metadata, which this server's trainer does not replay (dense models only)`;
  const exchanges = (trajectory as { exchanges?: Record<string, unknown> }).exchanges;
  if (exchanges && Object.values(exchanges).some((v) => Array.isArray(v) && v.length > 0)) {
    return `${where} is recorded as exchanges (not messages_and_choices), which this server's trainer does not read`;
  }
  return null;
}

/**
 * The trajectory groups of an RL batch, in order. Throws a ValidationError (422) naming the group and record (as
 * `body.batch.groups.{g}.records.{r}…`) when a bundle does not decode to ART's structure, and a not-implemented
 * error (501) for well-formed content the trainer cannot use.
 */
export function decodeTrajectoryGroupBundles(bundles: TrajectoryGroupBundleJson[], at: Loc = ['body', 'batch', 'groups']): TrajectoryGroupT[] {
  const groups: TrajectoryGroupT[] = [];
  try {
    bundles.forEach((bundle, g) => {
      const header = parseWith(GroupHeader, unpack(bundle.header, [...at, g, 'header']), [...at, g, 'header']);
      const trajectories = bundle.records.map((text, r) => {
        const loc = [...at, g, 'records', r];
        const record = parseWith(TrajectoryRecord, unpack(text, loc), loc);
        const trajectory = parseWith(Trajectory, record.payload, [...loc, 'payload']);
        checkRecord(record, trajectory, loc);
        const why = unsupported(record, trajectory, `group ${g} record ${r}`);
        if (why) throw notImplemented(`RL batch: ${why}`);
        return trajectory;
      });
      groups.push({
        trajectories, exceptions: header.exceptions ?? [], metadata: header.metadata ?? {}, metrics: header.metrics ?? {}, logs: header.logs ?? [],
      });
    });
  } catch (err) {
    if (err instanceof Refusal) throw new ValidationError([err.issue]);
    throw err;
  }
  return groups;
}

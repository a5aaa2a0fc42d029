// ART's TrajectoryGroupBundle built as ART builds it (art/distributed/trajectory_store.py `from_payload`, packing.py
// `TrajectoryGroupPayload.from_group`; docs/art.md "RL batches: the bundle encoding"): msgpack of the group payload
// without trajectories as the header, one msgpack TrajectoryPayload per trajectory as the records, and the bytes as
// pydantic's ser_json_bytes="base64" writes them in JSON (URL-safe alphabet, padded).
import { encode } from '@msgpack/msgpack';

type Json = Record<string, unknown>;

export const base64Url = (bytes: Uint8Array) => {
  const text = Buffer.from(bytes).toString('base64url');
  return text + '='.repeat((4 - (text.length % 4)) % 4);
};

const isChoice = (item: Json) => 'message' in item && 'finish_reason' in item && !('role' in item);

/** TrajectoryPayload.model_dump(mode="python") of a trajectory (ART's Trajectory JSON). */
export function trajectoryRecord(trajectory: Json): Json {
  const items = (trajectory.messages_and_choices as Json[] | undefined) ?? [];
  const histories = (trajectory.additional_histories as { messages_and_choices: Json[] }[] | undefined) ?? [];
  return {
    payload: trajectory,
    choice_positions: items.flatMap((item, i) => (isChoice(item) ? [i] : [])),
    additional_history_choice_positions: histories.map((h) => h.messages_and_choices.flatMap((item, i) => (isChoice(item) ? [i] : []))),
  };
}

/** TrajectoryGroupPayload.model_copy(update={"trajectories": ()}).model_dump(mode="python"). */
export function groupHeader(group: Json = {}): Json {
  return { trajectories: [], exceptions: [], metadata: {}, metrics: {}, logs: [], collect_packing_shape: false, ...group };
}

/** A bundle from raw msgpack values (tests that break the structure pass their own). */
export function bundleOf(header: unknown, records: unknown[], encodeBytes: (b: Uint8Array) => string = base64Url) {
  return { header: encodeBytes(encode(header)), records: records.map((r) => encodeBytes(encode(r))) };
}

/** TrajectoryGroupBundle.from_group(group) as it goes into a JSON body. */
export function bundleOfGroup(group: { trajectories: Json[] } & Json) {
  const { trajectories, ...rest } = group;
  return bundleOf(groupHeader(rest), trajectories.map(trajectoryRecord));
}

// Issue #44 item 8, the short CI version of `npm run test:abuse` (scripts/abuse-run.ts): a real `hearth serve`
// (embedded queue, one inference and one training worker, demo model); for 20 s bob sends every abusive request of
// the items 1–6 in a loop (test/helpers/abuse-load.ts) while alice sends 4-token chats and trains; then one
// kill -9 of the server under that load and a restart. The strict bar (alice's p99 ≤ 2 s, measured over 75 s) is
// the script's; here p99 has a looser bound that a loaded CI machine keeps (docs/testing.md says why), while
// everything else is asserted as strictly: bob answered 4xx or served, alice never 429/5xx, her job succeeds,
// no process exited or was replaced, healthy within 10 s of a restart with her data intact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SCALE } from '../helpers/abuse-load.js';
import { mixedRun, restartRun, startSession, stopSession, type MixedResult, type Session } from '../helpers/abuse-suite.js';

/** Alice's p99 bound here: the 2 s bar with room for a CI machine that other jobs load (see docs/testing.md). */
const P99_BOUND_MS = 5000;

describe('abuse suite: bob abuses while alice chats and trains', () => {
  let s: Session;
  let mixed: MixedResult;
  beforeAll(async () => {
    s = await startSession(DEFAULT_SCALE);
  }, 120_000);
  afterAll(async () => {
    if (s) expect(await stopSession(s)).toBe('ok'); // SQLite's integrity_check after the kill and the runs
  }, 30_000);

  it('alice is served throughout and nothing exits or restarts', async () => {
    mixed = await mixedRun(s, DEFAULT_SCALE, 20_000, 1, 60_000);
    const summary = JSON.stringify({ alice: { ...mixed.alice_chats, failures: mixed.alice_chats.failures.slice(0, 3) }, bob: mixed.bob.byRequest, bob_ms: mixed.bob_request_ms, alice_jobs: mixed.alice_job_times, bob_jobs: mixed.bob_jobs_by_state });
    console.log(`[abuse-mixed] ${summary}`);
    // Every abusive request was answered: a 4xx, or served in bob's share (the 24-level schema, the large legal
    // table, the streams, his training jobs up to his cap); never a 5xx or a broken connection.
    expect(mixed.bob.bad, JSON.stringify(mixed.bob.bad)).toEqual([]);
    expect(mixed.bob.rounds).toBeGreaterThanOrEqual(1);
    for (const refused of ['item1_rl_body_of_empty_objects', 'item2_refs_batch_to_one_big_object', 'item3_table_create_of_empty_rows']) expect(Object.keys(mixed.bob.byRequest[refused])).toEqual(['413']);
    for (const refused of ['item5_echo_logprobs_n128', 'item5_echo_logprobs_n128_two_prompts', 'item6_100_prompts_x_n128']) expect(Object.keys(mixed.bob.byRequest[refused])).toEqual(['400']);
    expect(mixed.bob.byRequest.item6_concurrent_streams['200']).toBeGreaterThanOrEqual(DEFAULT_SCALE.streams);
    // His burst of training jobs: those past his entity's cap are 429; none of the accepted ones fails.
    expect(mixed.bob.byRequest.item8_many_training_jobs['429']).toBeGreaterThan(0);
    expect(mixed.bob_jobs_by_state.failed).toBeUndefined();
    // Alice: never refused nor failed, and answered in time.
    expect(mixed.alice_chats.failures_by_status).toEqual({});
    expect(mixed.alice_chats.ok).toBeGreaterThan(10);
    expect(mixed.alice_chats.p99_ms!).toBeLessThanOrEqual(P99_BOUND_MS);
    expect(Object.values(mixed.alice_jobs)).toEqual(['succeeded']);
    // The same server and the same two workers, all up.
    expect(mixed.processes.unchanged, JSON.stringify(mixed.processes)).toBe(true);
    expect([mixed.health_after, mixed.system_check_after]).toEqual([200, 200]);
  }, 150_000);

  it('after a kill -9 under that load, healthy and answering a chat within 10 s, with alice\'s data intact', async () => {
    expect(mixed).toBeDefined();
    const [restart] = await restartRun(s, DEFAULT_SCALE, 1, 6000, mixed.alice_jobs, 10_000);
    console.log(`[abuse-mixed] restart ${JSON.stringify(restart)}`);
    expect(restart.error).toBeUndefined();
    expect(restart.orphaned_workers).toEqual([]);
    expect(restart.healthy_ms).not.toBeNull();
    expect(restart.chat_ms!).toBeLessThanOrEqual(10_000);
    expect(restart.data_problems).toEqual([]);
  }, 120_000);
});

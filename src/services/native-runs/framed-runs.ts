// The native training-runs API in every client framing ART has shipped (N1, N2, N3; docs/art.md "Framings"):
// a run's framing is fixed when it is resolved and stored with it, commands of that run are translated into the
// runs service's commands (native-runs/framing.ts), and every answer of that run is shaped for its framing
// (native-runs/framing-responses.ts). The runs service keeps all semantics: order, idempotency, execution.
import crypto from 'node:crypto';
import type { Store } from '../../store/sqlite/store.js';
import type { NativeOperationKind } from '../../store/records.js';
import { conflict, notFound, notImplemented } from '../../errors/domain-errors.js';
import type { NativeRunsService } from './runs.js';
import { ANONYMOUS_RUN_PREFIX, resolveFraming, type NativeWire, type TranslatedCommand } from './framing.js';
import { renderOperation, renderResult, renderRun } from './framing-responses.js';
import { findInitialCheckpoint } from './initial-state.js';
import type { ResolveAnyRunBodyT } from '../../schemas/native-framings.js';
import type { ResolveRunBodyT } from '../../schemas/native-training.js';

export class NativeFramedRuns {
  constructor(
    private readonly store: Store,
    private readonly runs: NativeRunsService,
  ) {}

  /** The framing a run speaks (404 for an unknown run, or another entity's). */
  wire(entity: string, runId: string): NativeWire {
    const run = this.store.nativeRuns.run(entity, runId);
    if (!run) throw notFound(`Training run ${runId} not found`);
    return this.store.nativeRunWires.get(run.id).wire;
  }

  resolve(entity: string, body: ResolveAnyRunBodyT) {
    const framing = resolveFraming(body);
    if (framing.unsupported) throw notImplemented(framing.unsupported);
    // N3 without run_name: the resolve's request_id names the run, so the client's retries find the one it made.
    const runName = framing.anonymous ? `${ANONYMOUS_RUN_PREFIX}${crypto.createHash('sha256').update(body.request_id).digest('hex')}` : body.run_name!;
    const existing = this.store.nativeRuns.runByName(entity, runName);
    if (existing) {
      const was = this.store.nativeRunWires.get(existing.id).wire;
      if (was !== framing.wire) throw conflict(`training run "${runName}" was resolved by another ART client framing (${was}); nothing was changed`);
    }
    const { initial_state: initialState, ...rest } = body;
    // A retry finds its run, which already started from its initial state.
    const initial = !existing && initialState ? findInitialCheckpoint(this.store, entity, body.spec, initialState) : null;
    const resolved = this.runs.resolve(entity, { ...rest, run_name: runName } as ResolveRunBodyT, initial);
    if (!existing) this.store.nativeRunWires.set(resolved.run_id, { wire: framing.wire, anonymous: framing.anonymous });
    return renderRun(framing.wire, framing.anonymous, this.store.nativeRuns.runById(resolved.run_id)!);
  }

  get(entity: string, runId: string) {
    this.runs.get(entity, runId);
    return this.renderRun(runId);
  }

  close(entity: string, runId: string) {
    this.runs.close(entity, runId);
    return this.renderRun(runId);
  }

  submit(entity: string, runId: string, kind: NativeOperationKind, t: TranslatedCommand) {
    const op = this.runs.submit(entity, runId, kind, t.command, { fingerprint: t.fingerprint, batchKind: t.batchKind, unsupported: t.unsupported });
    return this.renderOperation(runId, op.operation_id);
  }

  operation(entity: string, runId: string, operationId: string) {
    this.runs.operation(entity, runId, operationId);
    return this.renderOperation(runId, operationId);
  }

  async cancel(entity: string, runId: string, operationId: string) {
    await this.runs.cancel(entity, runId, operationId);
    return this.renderOperation(runId, operationId);
  }

  result(entity: string, runId: string, operationId: string) {
    const envelope = this.runs.result(entity, runId, operationId);
    return renderResult(this.store.nativeRunWires.get(runId).wire, this.store.nativeRuns.op(runId, operationId)!, envelope.result);
  }

  release(entity: string, runId: string, operationId: string, requestId: string) {
    return this.runs.release(entity, runId, operationId, requestId);
  }

  private renderRun(runId: string) {
    const w = this.store.nativeRunWires.get(runId);
    return renderRun(w.wire, w.anonymous, this.store.nativeRuns.runById(runId)!);
  }

  private renderOperation(runId: string, operationId: string) {
    return renderOperation(this.store.nativeRunWires.get(runId).wire, this.store.nativeRuns.op(runId, operationId)!);
  }
}

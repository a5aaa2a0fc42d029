// /v1/training/runs…: the native training-runs API that newer ART ServerlessBackends drive (docs/art.md). Google-style
// `:verb` suffixes share a path segment with the id (`runs/{id}:close`), so those routes take the segment whole
// and split it here.
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { notFound } from '../../errors/domain-errors.js';
import type { NativeOperationKind } from '../../store/records.js';
import {
  NativeOperationResponse, NativeResultReleaseResponse, NativeResultResponse, NativeRunDeletedResponse, NativeRunResponse, OperationParams,
  OperationResultParams, ReleaseResultBody, RunCommandParams, RunParams,
} from '../../schemas/native-training.js';
import { CloseRunBody, NativeCommandEnvelope, ResolveAnyRunBody } from '../../schemas/native-framings.js';
import { NativeFramedRuns } from '../../services/native-runs/framed-runs.js';
import { framedCommand } from '../native-framed-bodies.js';
import { commandFingerprint } from '../../services/native-runs/admission.js';

/** `abc` → ['abc', null]; `abc:close` → ['abc', 'close']. */
export function splitVerb(segment: string): [string, string | null] {
  const at = segment.lastIndexOf(':');
  return at < 0 ? [segment, null] : [segment.slice(0, at), segment.slice(at + 1)];
}

const unknownVerb = (method: string, url: string) => notFound(`Not Found: ${method} ${url}`);

export function nativeTrainingRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['training-runs'];
  // Every route answers in the client framing its run was resolved in (N1, N2, N3: docs/art.md "Framings").
  const runs = new NativeFramedRuns(ctx.store, ctx.nativeRuns);
  const commandErrors = {
    404: 'Unknown run', 409: 'sequence_id gap or rewind (names the expected one), request_id reused with another body, run not open, or a command the run cannot do yet',
    501: 'A command this server does not execute',
  };
  const command = (kind: NativeOperationKind, path: string, summary: string): RouteDef =>
    defineRoute({
      method: 'POST', url: `/v1/training/runs/:run_id/${path}`, operationId: `native_${path}`, summary, tags, auth: 'bearer',
      params: RunCommandParams.pick({ run_id: true }), body: NativeCommandEnvelope, response: NativeOperationResponse, errors: commandErrors,
      bodyLimit: ctx.config.trainingBodyLimit, bodyLimitSetting: 'HEARTH_TRAINING_BODY_LIMIT',
      maxJsonValues: ctx.config.trainingMaxJsonValues, maxJsonValuesSetting: 'HEARTH_TRAINING_MAX_JSON_VALUES',
      handler: ({ auth, params, request }) =>
        runs.submit(auth.entity, params.run_id, kind, framedCommand(runs.wire(auth.entity, params.run_id), kind, params.run_id, request.body)),
    });
  return [
    defineRoute({
      method: 'POST', url: '/v1/training/runs::resolve', operationId: 'native_resolve_run', summary: 'Resolve Training Run (by run_name and spec)',
      tags, auth: 'bearer', body: ResolveAnyRunBody, response: NativeRunResponse,
      errors: {
        404: 'Base model not installed, or the checkpoint initial_state names not found',
        409: 'run_name exists with another spec or another client framing, or the initial_state checkpoint does not fit the spec',
        501: 'A spec this server cannot honour',
      },
      handler: ({ auth, body }) => runs.resolve(auth.entity, body),
    }),
    defineRoute({
      method: 'GET', url: '/v1/training/runs/:run_ref', operationId: 'native_get_run', summary: 'Get Training Run', tags, auth: 'bearer',
      params: RunParams, response: NativeRunResponse, errors: { 404: 'Unknown run' },
      handler: ({ auth, params, request }) => {
        const [runId, verb] = splitVerb(params.run_ref);
        if (verb !== null) throw unknownVerb('GET', request.url);
        return runs.get(auth.entity, runId);
      },
    }),
    // Hearth's own: ART has no call that deletes a run (docs/art.md "Deleting a run").
    defineRoute({
      method: 'DELETE', url: '/v1/training/runs/:run_ref', operationId: 'native_delete_run',
      summary: 'Delete Training Run (its learner, learner versions, kept inputs and saved states; published checkpoints stay)', tags, auth: 'bearer',
      params: RunParams, response: NativeRunDeletedResponse,
      errors: { 404: 'Unknown run', 409: 'An operation is admitted or running (nothing deleted)' },
      handler: ({ auth, params, request }) => {
        const [runId, verb] = splitVerb(params.run_ref);
        if (verb !== null) throw unknownVerb('DELETE', request.url);
        return ctx.nativeRuns.delete(auth.entity, runId);
      },
    }),
    defineRoute({
      method: 'POST', url: '/v1/training/runs/:run_ref', operationId: 'native_close_run', summary: 'Close Training Run (`{run_id}:close`)', tags,
      auth: 'bearer', params: RunParams, body: CloseRunBody, response: NativeRunResponse, errors: { 404: 'Unknown run' },
      handler: ({ auth, params, request }) => {
        const [runId, verb] = splitVerb(params.run_ref);
        if (verb !== 'close') throw unknownVerb('POST', request.url);
        return runs.close(auth.entity, runId);
      },
    }),
    command('forward_backward', 'forward_backward', 'Forward and backward pass (gradients kept until optim_step)'),
    command('optim_step', 'optim_step', 'Apply the kept gradients (one learner version)'),
    command('save_weights_for_sampler', 'save_weights_for_sampler', 'Publish the learner weights for sampling'),
    command('forward', 'forward', 'Forward pass: loss and token counts at the current weights, no gradient kept'),
    command('save_state', 'save_state', 'Save the committed learner version (weights and optimizer state) under a name'),
    command('load_state', 'load_state', 'Restore a saved state as the next learner version (optimizer state when restore_optimizer)'),
    // ART's client posts both of its load methods to load_state (restore_optimizer in the body); this path says it.
    defineRoute({
      method: 'POST', url: '/v1/training/runs/:run_id/load_state_with_optimizer', operationId: 'native_load_state_with_optimizer',
      summary: 'load_state with restore_optimizer: true', tags, auth: 'bearer', params: RunCommandParams.pick({ run_id: true }), body: NativeCommandEnvelope,
      response: NativeOperationResponse, errors: commandErrors,
      handler: ({ auth, params, request }) => {
        const t = framedCommand(runs.wire(auth.entity, params.run_id), 'load_state', params.run_id, request.body);
        const command = { ...t.command, restore_optimizer: true };
        return runs.submit(auth.entity, params.run_id, 'load_state', { ...t, command, fingerprint: commandFingerprint(command) });
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/training/runs/:run_id/operations/:operation_ref', operationId: 'native_get_operation', summary: 'Get Operation',
      tags, auth: 'bearer', params: OperationParams, response: NativeOperationResponse, errors: { 404: 'Unknown run or operation' },
      handler: ({ auth, params, request }) => {
        const [operationId, verb] = splitVerb(params.operation_ref);
        if (verb !== null) throw unknownVerb('GET', request.url);
        return runs.operation(auth.entity, params.run_id, operationId);
      },
    }),
    defineRoute({
      method: 'POST', url: '/v1/training/runs/:run_id/operations/:operation_ref', operationId: 'native_cancel_operation',
      summary: 'Cancel Operation (`{operation_id}:cancel`)', tags, auth: 'bearer', params: OperationParams, response: NativeOperationResponse,
      errors: { 404: 'Unknown run or operation' },
      handler: ({ auth, params, request }) => {
        const [operationId, verb] = splitVerb(params.operation_ref);
        if (verb !== 'cancel') throw unknownVerb('POST', request.url);
        return runs.cancel(auth.entity, params.run_id, operationId);
      },
    }),
    defineRoute({
      method: 'GET', url: '/v1/training/runs/:run_id/operations/:operation_id/:result_ref', operationId: 'native_get_result',
      summary: 'Get Operation Result', tags, auth: 'bearer', params: OperationResultParams, response: NativeResultResponse,
      errors: { 404: 'Unknown run or operation, or result released', 409: 'Operation has not succeeded' },
      handler: ({ auth, params, request }) => {
        if (params.result_ref !== 'result') throw unknownVerb('GET', request.url);
        return runs.result(auth.entity, params.run_id, params.operation_id);
      },
    }),
    defineRoute({
      method: 'POST', url: '/v1/training/runs/:run_id/operations/:operation_id/:result_ref', operationId: 'native_release_result',
      summary: 'Release Operation Result (`result:release`)', tags, auth: 'bearer', params: OperationResultParams, body: ReleaseResultBody,
      response: NativeResultReleaseResponse, errors: { 404: 'Unknown run or operation', 409: 'Operation still running' },
      handler: ({ auth, params, body, request }) => {
        if (params.result_ref !== 'result:release') throw unknownVerb('POST', request.url);
        return runs.release(auth.entity, params.run_id, params.operation_id, body.request_id);
      },
    }),
  ];
}

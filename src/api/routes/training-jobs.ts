// /v1/preview/training-jobs…: create RL and SFT jobs, follow them through their events, cancel them.
import { defineRoute, type RouteDef } from '../route.js';
import sharp from 'sharp';
import type { AppContext } from '../context.js';
import { ValidationError } from '../errors.js';
import { rlBodyCountIssue, rlBodyCounts } from '../../domain/rl-body-counts.js';
import { jobPlotSeries, trainingPlotSvg } from '../../services/training-plot.js';
import {
  CreateSFTTrainingJob, CreateTrainingJob, EventPage, EventQuery, JobIdParams, TrainingJobDetail, TrainingJobResponse,
} from '../../protocol/training.js';

export function trainingJobRoutes(ctx: AppContext): RouteDef[] {
  const tags = ['training-jobs'];
  return [
    defineRoute({
      method: 'POST', url: '/v1/preview/training-jobs', operationId: 'create_training_job_v1_preview_training_jobs_post', summary: 'Create RL Training Job',
      tags, auth: 'bearer', body: CreateTrainingJob, response: TrainingJobResponse,
      // ART sends every completion token back with its logprobs: far more than other routes.
      bodyLimit: ctx.config.trainingBodyLimit, bodyLimitSetting: 'HEARTH_TRAINING_BODY_LIMIT',
      maxJsonValues: ctx.config.trainingMaxJsonValues, maxJsonValuesSetting: 'HEARTH_TRAINING_MAX_JSON_VALUES',
      // Millions of tiny messages fit the byte and value budgets yet would each be validated, stored and tensorised.
      precheck: (body) => {
        const issue = rlBodyCountIssue(rlBodyCounts(body));
        if (issue) throw new ValidationError([issue]);
      },
      errors: {
        400: 'Unsupported configuration', 404: 'Unknown model', 413: 'Body over HEARTH_TRAINING_BODY_LIMIT or HEARTH_TRAINING_MAX_JSON_VALUES',
        422: 'Invalid body, or more trajectories or messages than one job may carry', 429: 'Queue full', 501: 'No training engine',
      },
      handler: ({ auth, body }) => ctx.trainingJobs.createRl(auth.entity, body),
    }),
    defineRoute({
      method: 'POST', url: '/v1/preview/sft-training-jobs', operationId: 'create_sft_training_job_v1_preview_sft_training_jobs_post',
      summary: 'Create SFT Training Job', tags, auth: 'bearer', body: CreateSFTTrainingJob, response: TrainingJobResponse,
      errors: { 400: 'Unreadable training data URL', 404: 'Unknown model', 429: 'Queue full', 501: 'No training engine' },
      handler: ({ auth, body }) => ctx.trainingJobs.createSft(auth.entity, body),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/training-jobs/:training_job_id', operationId: 'get_training_job_v1_preview_training_jobs__training_job_id__get',
      summary: 'Get Training Job', tags, auth: 'bearer', params: JobIdParams, response: TrainingJobDetail, errors: { 404: 'Unknown job' },
      handler: ({ auth, params }) => ctx.trainingJobs.get(auth.entity, params.training_job_id),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/training-jobs/:training_job_id/events',
      operationId: 'get_training_job_events_v1_preview_training_jobs__training_job_id__events_get', summary: 'Get Training Job Events', tags,
      auth: 'bearer', params: JobIdParams, query: EventQuery, response: EventPage, errors: { 404: 'Unknown job' },
      handler: ({ auth, params, query }) => ctx.trainingJobs.events(auth.entity, params.training_job_id, query),
    }),
    defineRoute({
      method: 'GET', url: '/v1/preview/training-jobs/:training_job_id/plot.png',
      operationId: 'plot_training_job_v1_preview_training_jobs__training_job_id__plot_png_get', summary: 'Plot Training Job (PNG)', tags,
      auth: 'bearer', params: JobIdParams, errors: { 404: 'Unknown job' },
      handler: async ({ auth, params, reply }) => {
        const job = ctx.trainingJobs.require(auth.entity, params.training_job_id);
        const events = ctx.store.events.all(job.id);
        const svg = trainingPlotSvg(`${job.kind.toUpperCase()} job ${job.id} — ${job.status}`, jobPlotSeries(events));
        const png = await sharp(Buffer.from(svg)).png().toBuffer();
        reply.header('content-type', 'image/png').header('cache-control', 'no-store');
        return png;
      },
    }),
    defineRoute({
      method: 'POST', url: '/v1/preview/training-jobs/:training_job_id/cancel',
      operationId: 'cancel_training_job_v1_preview_training_jobs__training_job_id__cancel_post', summary: 'Cancel Training Job', tags,
      auth: 'bearer', params: JobIdParams, response: TrainingJobDetail, errors: { 404: 'Unknown job', 409: 'Job already finished' },
      handler: ({ auth, params }) => ctx.trainingJobs.cancel(auth.entity, params.training_job_id),
    }),
  ];
}

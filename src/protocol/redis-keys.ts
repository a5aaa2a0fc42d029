// Redis names one installation uses, all under its prefix, shared by the API and `hearth worker`.
export const reportsStream = (prefix: string) => `${prefix}:reports`;
export const controlChannel = (prefix: string) => `${prefix}:control`;
export const REPORTS_GROUP = 'api';
/** The consumer every API process reads the reports as (src/queue/bullmq.ts says why one name). */
export const REPORTS_CONSUMER = 'api';
/**
 * The client name a worker's report connection carries (CLIENT SETNAME): the API looks for it in CLIENT LIST to
 * tell a worker that is silent because it is loading a model from one that died (its socket closed).
 */
export const workerConnectionName = (prefix: string, workerId: string) => `${prefix}:worker:${workerId}`.replace(/\s/g, '_');
/** Keep the reports stream bounded even if the API is down for a long time (approximate trim). */
export const REPORTS_MAXLEN = 200_000;

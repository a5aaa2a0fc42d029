// Redis names one installation uses, all under its prefix, shared by the API and `hearth worker`.
export const reportsStream = (prefix: string) => `${prefix}:reports`;
export const controlChannel = (prefix: string) => `${prefix}:control`;
export const REPORTS_GROUP = 'api';
/** Keep the reports stream bounded even if the API is down for a long time (approximate trim). */
export const REPORTS_MAXLEN = 200_000;

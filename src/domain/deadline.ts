// A bounded wait: what a promise gives, or what the deadline says once `ms` pass first. Its timer is cleared either
// way, so a settled wait keeps no timer alive.

/** `work`'s outcome, or `atDeadline()`'s (return a fallback, or throw) when `work` has not settled within `ms`. */
export async function withDeadline<T>(work: Promise<T>, ms: number, atDeadline: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(atDeadline());
      } catch (err) {
        reject(err);
      }
    }, ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

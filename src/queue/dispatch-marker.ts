// A file naming the training job the scheduler is handing to a worker, written before its payload is read and
// removed once the hand-over returns. A process that dies in between (out of memory parsing a huge payload, or
// any crash the hand-over causes) leaves the file behind, and the next start fails that job with the reason
// instead of handing it over again, and dying again, at every start.
import fs from 'node:fs';
import path from 'node:path';

export class DispatchMarker {
  private readonly file: string;

  constructor(home: string) {
    this.file = path.join(home, 'dispatching-job');
  }

  /** Written synchronously, so it is on disk before the work that may crash begins. */
  begin(jobId: string): void {
    fs.writeFileSync(this.file, jobId, { mode: 0o600 });
  }

  end(): void {
    fs.rmSync(this.file, { force: true });
  }

  /** The job a previous process was handing over when it stopped, if any; the mark is cleared. */
  takeLeftOver(): string | null {
    let jobId: string;
    try {
      jobId = fs.readFileSync(this.file, 'utf8').trim();
    } catch {
      return null;
    }
    this.end();
    return jobId || null;
  }
}

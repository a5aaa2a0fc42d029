// Hardware options with token prices for GET /inference/{vendor}/v2/hardware. Prices come from throughput
// measured on the device for the model: the first request for a model runs a short calibration on an
// inference worker (through the queue), later ones use the cached measurement until the model's files or
// the device change. Prices are measured, never estimated (docs/architecture.md, Hardware): a request that
// comes while the server's own inference workers are still starting waits for their first report.
import { setTimeout as sleep } from 'node:timers/promises';
import type { BaseModelInfo } from '../models/base-models.js';
import type { QueueService } from '../queue/queue-service.js';
import { HardwareCatalogue, latestReports, modelFingerprint, RUNTIME_BYTES_PER_PARAM, servingSlots } from '../hardware/catalogue.js';
import { uncalibratedConfigs } from '../hardware/pricing.js';
import type { HardwareResponse } from '../protocol/hardware.js';
import { unavailable } from '../errors/domain-errors.js';

export interface CalibrationReport {
  deviceKey: string;
  prefillTps: number;
  decodeTps: number;
}

/**
 * How long a request waits for a starting inference worker's first report (its devices come with it). A worker
 * reports 1–3 s after it is started on an idle 2-core machine; the bound covers a loaded one.
 */
export const FIRST_REPORT_WAIT_MS = 30_000;
const FIRST_REPORT_POLL_MS = 50;

export class HardwarePricing {
  private readonly inflight = new Map<string, Promise<void>>();

  constructor(
    readonly catalogue: HardwareCatalogue,
    private readonly queue: QueueService | null,
    private readonly log: (msg: string) => void = () => {},
    private readonly firstReportWaitMs = FIRST_REPORT_WAIT_MS,
  ) {}

  async options(model: BaseModelInfo, vendor: string): Promise<HardwareResponse> {
    if (!this.queue) throw unavailable('No inference workers are attached to this server: hardware options are measured on them');
    const workers = await this.liveInferenceWorkers(this.queue);
    // An empty list would tell the client "no hardware can serve this model"; before the first heartbeat
    // (the seconds after a start, or while every worker restarts) the truth is "not known yet".
    if (workers.length === 0) {
      throw unavailable('No inference worker has reported yet (they may still be starting); hardware options are measured on them: retry shortly', { retryAfterSec: 2 });
    }
    const manifest = model.manifest as { id: string; parameters: number };
    const pending = uncalibratedConfigs({
      devices: latestReports(workers),
      serving: servingSlots(workers),
      model: { id: model.id, paramCount: manifest.parameters, bytesPerParam: RUNTIME_BYTES_PER_PARAM },
      throughput: this.catalogue.calibration.throughputFor(model.id, modelFingerprint(model.manifest)),
      vendor,
    });
    if (pending.length) await this.calibrate(model).catch((err: Error) => this.log(`calibration of ${model.id} failed: ${err.message}`));
    return this.catalogue.optionsFor({ workers, manifest: model.manifest, vendor });
  }

  /**
   * The live inference workers; while there are none but the transport has started some (embedded mode, right
   * after `hearth serve` starts), their first report, waited for up to `firstReportWaitMs`. Redis workers run on
   * other hosts and are not started by this process, so there is nothing to wait for: none live answers at once.
   */
  private async liveInferenceWorkers(queue: QueueService) {
    const deadline = Date.now() + this.firstReportWaitMs;
    let workers = queue.liveWorkers('inference');
    while (workers.length === 0 && queue.startingWorkers('inference') > 0 && Date.now() < deadline) {
      await sleep(FIRST_REPORT_POLL_MS);
      workers = queue.liveWorkers('inference');
    }
    return workers;
  }

  /** One calibration run per model at a time; concurrent callers share it. */
  calibrate(model: BaseModelInfo): Promise<void> {
    let run = this.inflight.get(model.id);
    if (!run) {
      run = (async () => {
        if (!this.queue) throw new Error('no inference workers');
        const result = (await this.queue.gateway.submit({
          op: 'calibrate', body: null, stream: false, queueKey: `calibrate:${model.id}`,
          model: { baseModel: model.id, baseModelDir: model.dir, adapterDir: null, name: model.id },
        })) as CalibrationReport;
        this.catalogue.calibration.record({
          modelId: model.id, modelFileHash: modelFingerprint(model.manifest), deviceKey: result.deviceKey,
          prefillTps: result.prefillTps, decodeTps: result.decodeTps, measuredAt: new Date().toISOString(),
        });
      })().finally(() => this.inflight.delete(model.id));
      this.inflight.set(model.id, run);
    }
    return run;
  }
}

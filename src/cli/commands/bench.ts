// hearth bench hardware --model <id> [--device cpu|cuda[:N]|webgpu[:N]]
// The calibration run the hardware endpoint uses, run here in the foreground: load the model on the device,
// measure prefill and decode tokens/s, and print them with the prices they give (JSON).
import { loadConfig } from '../../config/config.js';
import { parseArgs, stringFlag } from '../args.js';
import { detectDevices } from '../../hardware/detect.js';
import { deviceKeyOf, gpuOfDevice } from '../../hardware/device-config.js';
import { loadCosts } from '../../hardware/costs.js';
import { hardwareOptions } from '../../hardware/pricing.js';
import { RUNTIME_BYTES_PER_PARAM } from '../../hardware/catalogue.js';
import { getModel } from '../../models/model-store.js';

const USAGE = 'usage: hearth bench hardware --model <publisher/name> [--device cpu|cuda[:N]|webgpu[:N]]';

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  const [what] = args.positionals;
  const modelId = stringFlag(args, 'model');
  if (what !== 'hardware' || !modelId) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const device = stringFlag(args, 'device') ?? 'cpu';
  const config = loadConfig();
  const manifest = getModel(config.home, modelId);
  if (!manifest) {
    process.stderr.write(`hearth bench: model "${modelId}" is not installed in ${config.home} (see "hearth models list")\n`);
    return 1;
  }
  const { loadModel } = await import('../../runtime/load-model.js');
  const { createEngineFromRuntime } = await import('../../../worker/inference/openai-adapter.js');
  const { calibrate } = await import('../../../worker/inference/calibrate.js');
  const loaded = await loadModel(modelId, { home: config.home, device, log: (m: string) => process.stderr.write(`${m}\n`) });
  const hearth = createEngineFromRuntime(loaded, { kvCacheBytes: 2 ** 28 });
  const measured = await calibrate(hearth, loaded.config.vocabSize);
  await loaded.runner.release();

  const report = await detectDevices();
  const deviceKey = deviceKeyOf(report, loaded.runner.device);
  const options = hardwareOptions({
    devices: [report],
    serving: [{ host: report.host, device: loaded.runner.device }],
    model: { id: modelId, paramCount: manifest.parameters, bytesPerParam: RUNTIME_BYTES_PER_PARAM },
    throughput: (key) => (key === deviceKey ? { prefillTps: measured.prefillTps, decodeTps: measured.decodeTps } : undefined),
    vendor: gpuOfDevice(report, loaded.runner.device)?.vendor ?? 'cpu',
    costs: loadCosts(),
  });
  const round = (x: number) => Math.round(x * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({ model: modelId, device: loaded.runner.device, device_key: deviceKey, prefill_tokens_per_second: round(measured.prefillTps), decode_tokens_per_second: round(measured.decodeTps), prompt_tokens: measured.promptTokens, decode_tokens: measured.decodeTokens, hardware: options }, null, 2)}\n`,
  );
  return 0;
}

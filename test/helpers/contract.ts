// Validate response bodies against the component schemas of the official OpenAPI document.
// The document lives in ../shared/spec: when it is missing, the check fails naming the path (helpers/shared.ts).
import fs from 'node:fs';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { sharedPath } from './shared.js';

// ajv is CommonJS: under NodeNext its default export is the module object.
const Ajv2020 = (Ajv2020Module as unknown as { default: typeof Ajv2020Module.default }).default;
let ajv: InstanceType<typeof Ajv2020> | null = null;

function load() {
  if (ajv) return ajv;
  const doc = JSON.parse(fs.readFileSync(sharedPath('spec', 'wandb-serverless-training.openapi.json'), 'utf8'));
  ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: unknown) => void)(ajv);
  ajv.addSchema({ $id: 'spec', components: doc.components }, 'spec');
  return ajv;
}

/** Errors of `body` against `#/components/schemas/<name>` of the official document ([] = valid). */
export function contractErrors(name: string, body: unknown): string[] {
  const a = load();
  const validate = a.getSchema(`spec#/components/schemas/${name}`);
  if (!validate) throw new Error(`no schema ${name} in the spec`);
  return validate(body) ? [] : (validate.errors ?? []).map((e: { instancePath: string; message?: string }) => `${e.instancePath} ${e.message}`);
}

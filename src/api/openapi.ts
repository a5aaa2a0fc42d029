// The OpenAPI 3.1 document, generated from the same zod schemas that validate requests.
import { z } from 'zod';
import type { RouteDef } from './route.js';
import { validationStatus } from './errors.js';
import { HTTPValidationError, ErrorDetail, ErrorReason, OpenAIError, OpenAIValidationError } from '../protocol/common.js';
import { AnthropicError } from '../schemas/anthropic.js';

export const INTERFACE_VERSION = '0.1.0';

type JsonSchema = Record<string, unknown>;

export function buildOpenApi(defs: RouteDef[]): Record<string, unknown> {
  const components: Record<string, JsonSchema> = {};
  // Named schemas (`.meta({id})`) go to components and are referenced, as FastAPI does.
  const toSchema = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
    const raw = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any', cycles: 'ref', reused: 'inline' });
    // Named schemas land in $defs; OpenAPI keeps them under components.
    const json = JSON.parse(JSON.stringify(raw).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonSchema & {
      $defs?: Record<string, JsonSchema>;
    };
    for (const [id, s] of Object.entries(json.$defs ?? {})) components[id] = s;
    delete json.$defs;
    delete json.$schema;
    // A named root comes back as a bare $ref to its own $defs entry, already moved to components.
    return json;
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const def of defs) {
    const urls = Array.isArray(def.url) ? def.url : [def.url];
    for (const url of urls) {
      // `::` is a literal colon (`runs::resolve` serves `runs:resolve`).
      const oaPath = url.split('::').map((part) => part.replace(/:([A-Za-z_]+)/g, '{$1}')).join(':');
      const parameters: unknown[] = [];
      for (const [where, schema] of [['path', def.params], ['query', def.query]] as const) {
        if (!schema) continue;
        const obj = toSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
        for (const [pname, ps] of Object.entries(obj.properties ?? {})) {
          parameters.push({ name: pname, in: where, required: where === 'path' || (obj.required ?? []).includes(pname), schema: ps });
        }
      }
      const errorSchema = def.errorStyle === 'reason' ? ErrorReason : def.errorStyle === 'openai' ? OpenAIError : def.errorStyle === 'anthropic' ? AnthropicError : ErrorDetail;
      const validationSchema = def.errorStyle === 'openai' ? OpenAIValidationError : HTTPValidationError;
      const responses: Record<string, unknown> = {
        '200': { description: 'Successful Response', content: { 'application/json': { schema: def.response ? toSchema(def.response, 'output') : {} } } },
      };
      const validates = Boolean(def.body || def.query || def.params);
      const style = def.errorStyle ?? 'detail';
      const validation = String(validationStatus(style));
      if (validates) {
        const schema = style === 'anthropic' ? errorSchema : validationSchema;
        responses[validation] = { description: 'Validation Error', content: { 'application/json': { schema: toSchema(schema, 'output') } } };
      }
      for (const [status, description] of Object.entries(def.errors ?? {})) {
        // On OpenAI routes validation shares 400 with the route's own bad-request errors: either body.
        const schema = validates && status === validation
          ? { anyOf: [toSchema(errorSchema, 'output'), toSchema(validationSchema, 'output')] }
          : toSchema(errorSchema, 'output');
        responses[status] = { description: validates && status === validation ? `${description}, or Validation Error` : description, content: { 'application/json': { schema } } };
      }
      const op: Record<string, unknown> = {
        tags: def.tags,
        summary: def.summary,
        operationId: urls.length > 1 && url !== urls[0] ? `${def.operationId}_${urls.indexOf(url)}` : def.operationId,
        parameters,
        responses,
      };
      const bodySchema = def.body ?? def.documentedBody;
      if (bodySchema) op.requestBody = { required: true, content: { 'application/json': { schema: toSchema(bodySchema, 'input') } } };
      if (def.auth === 'bearer') op.security = [{ HTTPBearer: [] }];
      if (def.auth === 'basic-or-bearer') op.security = [{ HTTPBasic: [] }, { HTTPBearer: [] }];
      if (def.auth === 'api-key-or-bearer') op.security = [{ APIKeyHeader: [] }, { HTTPBearer: [] }];
      (paths[oaPath] ??= {})[def.method.toLowerCase()] = op;
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Hearth',
      version: INTERFACE_VERSION,
      description: 'Self-hosted training (W&B Training API), inference (OpenAI-compatible) and tables (Weave-compatible).',
    },
    paths,
    components: {
      schemas: components,
      securitySchemes: { HTTPBearer: { type: 'http', scheme: 'bearer' }, HTTPBasic: { type: 'http', scheme: 'basic' }, APIKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' } },
    },
  };
}

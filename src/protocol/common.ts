// Shapes shared by many routes: FastAPI validation errors, error bodies, list envelopes, query params.
import { z } from 'zod';

export const ValidationErrorItem = z
  .object({ loc: z.array(z.union([z.string(), z.number().int()])), msg: z.string(), type: z.string() })
  .meta({ id: 'ValidationError' });
export const HTTPValidationError = z.object({ detail: z.array(ValidationErrorItem) }).meta({ id: 'HTTPValidationError' });
export const ErrorDetail = z.object({ detail: z.string() }).meta({ id: 'ErrorDetail' });
export const ErrorReason = z.object({ reason: z.string() }).meta({ id: 'ErrorReason' });
const OpenAIErrorObject = z
  .object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() })
  .meta({ id: 'OpenAIErrorObject' });
export const OpenAIError = z.object({ error: OpenAIErrorObject }).meta({ id: 'OpenAIError' });
/** A validation error (400) on an OpenAI route: OpenAI's error object plus FastAPI's list (docs/architecture.md, "Errors"). */
export const OpenAIValidationError = z
  .object({ error: OpenAIErrorObject, detail: z.array(ValidationErrorItem) })
  .meta({ id: 'OpenAIValidationError' });

/** Query integers arrive as text; accept canonical integer text, leave anything else to fail as "not an integer". */
export const queryInt = (schema: z.ZodNumber) =>
  z.preprocess((v) => (typeof v === 'string' && /^[+-]?\d+$/.test(v.trim()) ? Number(v) : v), schema);

export const PageQuery = z.object({
  after: z.string().optional(),
  limit: queryInt(z.number().int().min(1).max(100)).default(20),
});

export function paginated<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      object: z.string().default('list'),
      data: z.array(item),
      first_id: z.string().default(''),
      last_id: z.string().default(''),
      has_more: z.boolean(),
    })
    .meta({ id });
}

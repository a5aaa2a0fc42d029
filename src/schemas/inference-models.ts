import { z } from 'zod';

export const ModelEntry = z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string(), root: z.string() });
export const ModelList = z.object({ object: z.literal('list'), data: z.array(ModelEntry) });

/** The minimum every chat request has; the inference engine validates the rest of its parameters. */
export const ChatCompletionBody = z.looseObject({ model: z.string().min(1), messages: z.array(z.record(z.string(), z.unknown())).min(1) });
export const CompletionBody = z.looseObject({ model: z.string().min(1), prompt: z.union([z.string(), z.array(z.string())]) });

export const HardwareParams = z.object({ vendor: z.string().max(64) });
export const HardwareQuery = z.object({ model: z.string().min(1).max(256) });

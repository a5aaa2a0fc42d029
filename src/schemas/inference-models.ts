import { z } from 'zod';

export const ModelEntry = z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string(), root: z.string() });
export const ModelList = z.object({ object: z.literal('list'), data: z.array(ModelEntry) });

export const HardwareParams = z.object({ vendor: z.string().max(64) });
export const HardwareQuery = z.object({ model: z.string().min(1).max(256) });

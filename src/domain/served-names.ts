// The served name of a checkpoint, `{entity}/{project}/{name}:step{N}`: what the inference routes resolve
// (after `wandb-artifact:///`), what the training API returns as a publication's `lora`, and, for ART's N3
// client, the `generation_id` it publishes, which ART's newest client code caps at 255 characters. Names are
// validated up front (model creation) so that every served name Hearth can produce fits.

/** ART's limit on a generation_id (N3 framing). */
export const MAX_GENERATION_ID_LENGTH = 255;
/** An entity is 1–64 characters (src/services/api-keys.ts). */
export const MAX_ENTITY_LENGTH = 64;
/** Steps up to 9,999,999,999 (a step per second for three centuries). */
export const MAX_STEP_DIGITS = 10;
/** What `/`, `/` and `:step` add. */
const SEPARATORS = 2 + ':step'.length;
/** project + name together: 174, so the longest served name is exactly 255. */
export const MAX_PROJECT_AND_NAME_LENGTH = MAX_GENERATION_ID_LENGTH - MAX_ENTITY_LENGTH - MAX_STEP_DIGITS - SEPARATORS;

export function servedName(entity: string, project: string, name: string, step: number): string {
  return `${entity}/${project}/${name}:step${step}`;
}

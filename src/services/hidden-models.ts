// Models Hearth keeps for itself: each native training run's learner versions live in a model of project
// `hearth-native-runs` (docs/art.md "The learner model is internal"). They are left out of every listing and
// are "not found" to the preview API and to inference by name; only the native-runs code reaches them, by id.
import type { ModelRecord } from '../store/records.js';

/** Project of the hidden models that hold each native run's learner versions. */
export const LEARNER_PROJECT = 'hearth-native-runs';

export function isHiddenModel(m: Pick<ModelRecord, 'project'>): boolean {
  return m.project === LEARNER_PROJECT;
}

// The demo model `hearth serve` installs into an empty store, generated from the recipe in
// models/tiny-random-llama.recipe.json (no network, a fraction of a second).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adoptGeneratedFolder, getModel, listModels, modelsRoot, type ModelManifest } from './model-store.js';
import { makeTinyModel, type TinySize } from '../synthetic-models/tiny-model.js';
import { mkdirSync } from 'node:fs';

export interface DemoRecipe {
  id: string;
  size: TinySize;
  seed: number;
  std: number;
}

export function demoRecipe(): DemoRecipe {
  return JSON.parse(readFileSync(fileURLToPath(new URL('../../models/tiny-random-llama.recipe.json', import.meta.url)), 'utf8'));
}

/**
 * If the store has no models, generate the demo model and add it as `hearth/tiny-random-llama`.
 * Returns the demo manifest when it was installed, null when the store already had models.
 */
export async function ensureDemoModel(home: string): Promise<ModelManifest | null> {
  if (listModels(home).length > 0) return null;
  const recipe = demoRecipe();
  const existing = getModel(home, recipe.id);
  if (existing) return null;
  mkdirSync(modelsRoot(home), { recursive: true });
  const tmp = mkdtempSync(join(modelsRoot(home), '.demo-'));
  try {
    makeTinyModel({ dir: tmp, size: recipe.size, seed: recipe.seed, std: recipe.std });
    return adoptGeneratedFolder(home, tmp, recipe.id, `generated: ${JSON.stringify(recipe)}`);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

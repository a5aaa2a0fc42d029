// Node ESM resolve hook, registered by backend.ts before it imports
// `@tensorflow/tfjs-core/dist/register_all_gradients.js`.
//
// Why: the gradient functions of tfjs-core ship only as ESM files whose relative imports
// have no `.js` suffix (`from './gradients/Abs_grad'`) or name a folder (`'./gradients'`),
// which Node's ESM resolver rejects. The `@tensorflow/tfjs` union package would register
// them, but only tfjs-core is installed. This hook appends `.js` / `/index.js` to such
// specifiers, and only for files inside tfjs-core's `dist/` folder.
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export async function resolve(specifier, context, nextResolve) {
  const parent = context.parentURL ?? '';
  const isRelative = specifier.startsWith('./') || specifier.startsWith('../');
  if (isRelative && parent.includes('/@tensorflow/tfjs-core/dist/') && !specifier.endsWith('.js')) {
    const url = new URL(specifier, parent);
    const path = fileURLToPath(url);
    if (existsSync(`${path}.js`)) return nextResolve(`${url.href}.js`, context);
    if (existsSync(path) && statSync(path).isDirectory()) return nextResolve(`${url.href}/index.js`, context);
  }
  return nextResolve(specifier, context);
}

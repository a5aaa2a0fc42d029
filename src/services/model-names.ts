// Inference model names (spec training-api.md §4):
//   <publisher>/<model>                                   a base model
//   wandb-artifact:///<entity>/<project>/<name>           a trained model, latest checkpoint (base weights before any)
//   wandb-artifact:///<entity>/<project>/<name>:step<N>   that step (also :latest, :v<N> = step N)
// Two slashes after the scheme are accepted too, as in W&B's cURL sample.

export type ModelRef =
  | { kind: 'base'; id: string }
  | { kind: 'trained'; entity: string; project: string; name: string; step: number | 'latest' };

export function parseModelName(name: string): ModelRef | { error: string } {
  if (!name.startsWith('wandb-artifact:')) {
    const parts = name.split('/');
    if (parts.length === 2 && parts.every((p) => /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(p))) return { kind: 'base', id: name };
    return { error: `unknown model "${name}"` };
  }
  const m = /^wandb-artifact:\/\/\/?([^/]+)\/([^/]+)\/([^/:]+)(?::([^/:]+))?$/.exec(name);
  if (!m) return { error: `malformed model name "${name}": use wandb-artifact:///<entity>/<project>/<name>[:step<N>]` };
  const [, entity, project, model, suffix] = m;
  if (!suffix || suffix === 'latest') return { kind: 'trained', entity, project, name: model, step: 'latest' };
  const step = /^(?:step|v)(\d{1,9})$/.exec(suffix);
  if (!step) return { error: `unknown version "${suffix}" in model "${name}": use :step<N>, :v<N> or :latest` };
  return { kind: 'trained', entity, project, name: model, step: Number(step[1]) };
}

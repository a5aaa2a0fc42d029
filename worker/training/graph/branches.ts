// The If branches the training graphs are made of (a forward and a backward, each with and without saved
// activations): every branch returns the same outputs in the same order, float tensors of fixed ranks, and an
// output a branch does not make is an empty tensor of its rank. The frozen weights are initializers of the root
// graph, which every branch reads: they exist once whatever the branch.
import { DataType, type GraphBuilder } from '../../../src/runtime/onnx-proto.js';

/** The outputs every branch returns: names and ranks, in order. */
export interface BranchOutputs { names: string[]; ranks: number[] }

/** An empty float tensor of `rank` (all dimensions 0), one initializer per rank. */
export function emptyOfRank(root: GraphBuilder, rank: number): string {
  return root.floats(`empty_rank${rank}`, Array.from({ length: rank }, () => 0), new Float32Array(0));
}

/** A branch output's type: float of its rank, each dimension its own symbol (the branches' sizes differ). */
function declare(g: GraphBuilder, name: string, rank: number): void {
  g.output(name, DataType.FLOAT, Array.from({ length: rank }, (_, k) => `${name}_${k}`));
}

/**
 * A branch computing some of the outputs (`build` returns them by name, each a value its nodes make); the rest are
 * empties. A value is the branch's output as it is (an Identity would copy it: the saved activations and logits
 * are the largest tensors of a step); only empties and a value given twice pass through an Identity.
 */
export function leafBranch(root: GraphBuilder, outputs: BranchOutputs, prefix: string, build: (g: GraphBuilder) => Map<string, string>): GraphBuilder {
  const g = root.subgraph();
  const values = build(g);
  const used = new Set<string>();
  outputs.names.forEach((name, i) => {
    let value = values.get(name);
    if (value === undefined || used.has(value)) {
      value = g.node('Identity', [value ?? emptyOfRank(root, outputs.ranks[i])], { outputs: [`${prefix}_${name}`] })[0];
    }
    used.add(value);
    declare(g, value, outputs.ranks[i]);
  });
  return g;
}

/** A branch that is itself an If on `cond` between two branches. */
export function ifBranch(root: GraphBuilder, outputs: BranchOutputs, prefix: string, cond: string, then: GraphBuilder, otherwise: GraphBuilder): GraphBuilder {
  const g = root.subgraph();
  g.node('If', [cond], { outputs: outputs.names.map((n) => `${prefix}_${n}`), attrs: { then_branch: { graph: then, name: `${prefix}_then` }, else_branch: { graph: otherwise, name: `${prefix}_else` } } });
  outputs.names.forEach((n, i) => declare(g, `${prefix}_${n}`, outputs.ranks[i]));
  return g;
}

/** The root If on `cond`; its outputs are the graph's outputs, with the given dimensions. */
export function rootIf(root: GraphBuilder, outputs: BranchOutputs, cond: string, then: GraphBuilder, otherwise: GraphBuilder, dims: (name: string, i: number) => (number | string)[]): void {
  root.node('If', [cond], { outputs: outputs.names, attrs: { then_branch: { graph: then, name: 'then' }, else_branch: { graph: otherwise, name: 'else' } } });
  outputs.names.forEach((n, i) => root.output(n, DataType.FLOAT, dims(n, i)));
}

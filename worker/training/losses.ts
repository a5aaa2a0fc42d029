// Training losses on per-token log-probabilities.
//
// Every loss here is a weighted sum over tokens, `sum_t weight_t * loss_t`. The caller bakes the
// mask and the normalisation into the weights (e.g. a token's loss weight / trainable tokens of the
// optimizer step for SFT), so micro-batches of one step simply add up.
import * as tf from '@tensorflow/tfjs-core';
import type { PolicyLossConfig } from '../../src/protocol/policy-loss.js';

/**
 * The values of a tensor, which is then disposed. (Never return a large typed array from tf.tidy:
 * tidy walks its result element by element looking for tensors, ~1 us per element.)
 */
export function readAndDispose(t: tf.Tensor): Float32Array {
  const values = t.dataSync() as Float32Array;
  t.dispose();
  return values;
}

/** Identity in the forward pass, zero gradient (tfjs has no stop_gradient / detach). */
export function stopGradient<T extends tf.Tensor>(x: T): T {
  const f = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => ({
    value: tf.clone(args[0] as tf.Tensor),
    gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy),
  }));
  return f(x) as T;
}

/**
 * log softmax(logits)[i, targets[i]] for every row, fused: the forward pass is logit - logsumexp,
 * the backward pass dy * (onehot - softmax). About 3x less elementwise work than
 * tf.losses.softmaxCrossEntropy (training notes, pitfall 4). `onEntropy` receives the entropy of
 * each row's distribution (a metric, computed off the gradient tape).
 */
export function tokenLogprobs(logits: tf.Tensor2D, targets: Int32Array, onEntropy?: (entropy: Float32Array) => void): tf.Tensor1D {
  const [n, vocab] = logits.shape;
  if (targets.length !== n) throw new Error(`tokenLogprobs: ${targets.length} targets for ${n} rows`);
  const flatIndex = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    if (targets[i] < 0 || targets[i] >= vocab) throw new Error(`target token ${targets[i]} is outside the vocabulary (${vocab})`);
    flatIndex[i] = i * vocab + targets[i];
  }
  const f = tf.customGrad((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const x = args[0] as tf.Tensor;
    const save = args[1] as tf.GradSaveFunc;
    // tidy: the [n, vocab]-sized temporaries are freed at once instead of at the end of the
    // gradient computation (at a 32k vocabulary each is 128 KB per token).
    // Ops inside a customGrad forward are not recorded on the gradient tape, so nothing computed
    // here is kept alive for the backward pass (which is why the entropy metric is computed here).
    const lse = tf.tidy(() => tf.logSumExp(x, -1)); // [n]
    const value = tf.tidy(() => tf.sub(tf.gather(tf.reshape(x, [-1]), tf.tensor1d(flatIndex, 'int32')), lse));
    if (onEntropy) onEntropy(readAndDispose(tf.tidy(() => entropyFromLogits(x, lse))));
    save([x, lse]);
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) =>
        tf.tidy(() => {
          const [xs, lseSaved] = saved;
          const probs = tf.exp(tf.sub(xs, tf.expandDims(lseSaved, 1)));
          // dy * onehot as a scatter of dy into the flat [n * vocab] grid (no one-hot tensor; and
          // wasm's OneHot ignores the float32 dtype, writing int32 bits).
          const dyAtTargets = tf.reshape(tf.unsortedSegmentSum(dy, tf.tensor1d(flatIndex, 'int32'), n * vocab), [n, vocab]);
          return tf.sub(dyAtTargets, tf.mul(tf.expandDims(dy, 1), probs));
        }),
    };
  });
  return f(logits) as tf.Tensor1D;
}

/** Entropy of softmax(x) per row given its logsumexp: lse - sum(p * x). */
function entropyFromLogits(x: tf.Tensor, lse: tf.Tensor): tf.Tensor {
  const lseColumn = tf.expandDims(lse, 1);
  return tf.sub(lse, tf.sum(tf.mul(tf.exp(tf.sub(x, lseColumn)), x), -1));
}

/** Entropy of softmax(logits) per row, [n]. A metric: no gradient is meant to flow through it. */
export function tokenEntropy(logits: tf.Tensor2D): tf.Tensor1D {
  return tf.tidy(() => entropyFromLogits(logits, tf.logSumExp(logits, -1)) as tf.Tensor1D);
}

/**
 * The SFT loss weight of each trained position: its loss weight (1 unless the sequence carries per-token weights)
 * over the step's trained tokens, so the loss is Σ w_t · (−log p_t) / N: with weights 1, the mean NLL.
 */
export function sftTokenWeights(lossWeights: Float32Array, trainable: number): Float32Array {
  return lossWeights.map((w) => w / trainable);
}

/** Supervised loss: -sum_t weight_t * logprob_t (weights are 0 on prompt tokens). */
export function weightedNll(logprobs: tf.Tensor1D, weights: Float32Array): tf.Scalar {
  return tf.neg(tf.sum(tf.mul(logprobs, tf.tensor1d(weights)))) as tf.Scalar;
}

/** Per-token inputs of the policy loss, all of length N (flattened batch). */
export interface PolicyTokens {
  /** Sampling-time logprob of each token; NaN where unknown (then the ratio is 1). */
  oldLogprobs: Float32Array;
  /** Advantage of the token's sequence. */
  advantages: Float32Array;
  /** Loss weight: 0 for non-trainable tokens, else the normalisation (e.g. 1 / (n_seq * seq_tokens)). */
  weights: Float32Array;
  /** Index of the token's sequence (for sequence-level importance sampling); any value where weight is 0. */
  sequenceIndex: Int32Array;
  numSequences: number;
  /** Reference-model logprobs, needed when klPenaltyCoef > 0. */
  refLogprobs?: Float32Array;
}

export interface PolicyLossParts {
  loss: tf.Scalar;
  policyLoss: tf.Scalar;
  kl: tf.Scalar;
}

/** RL policy loss (CISPO or PPO-clip) with ART's options; `newLogprobs` [N] carries the gradient. */
export function policyLoss(newLogprobs: tf.Tensor1D, tokens: PolicyTokens, cfg: PolicyLossConfig): PolicyLossParts {
  const n = newLogprobs.shape[0];
  if (tokens.oldLogprobs.length !== n) throw new Error(`policyLoss: ${tokens.oldLogprobs.length} old logprobs for ${n} tokens`);
  const known = new Float32Array(n);
  const oldFilled = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const known_i = !Number.isNaN(tokens.oldLogprobs[i]);
    known[i] = known_i ? 1 : 0;
    oldFilled[i] = known_i ? tokens.oldLogprobs[i] : 0;
  }
  const weights = tf.tensor1d(tokens.weights);
  const newDetached = stopGradient(newLogprobs);
  // Missing old logprobs: assume the token was sampled by the current policy (ratio 1).
  const old = tf.where(tf.tensor1d(known, 'bool'), tf.tensor1d(oldFilled), newDetached);
  const diff = tf.sub(newLogprobs, old);
  let ratio: tf.Tensor = tf.exp(diff);

  if (cfg.importanceSamplingLevel !== 'token') {
    // Mean logprob difference over each sequence's trainable tokens, broadcast back to its tokens.
    const trainable = new Float32Array(n);
    for (let i = 0; i < n; i++) trainable[i] = tokens.weights[i] !== 0 ? 1 : 0;
    const trainableT = tf.tensor1d(trainable);
    const seq = tf.tensor1d(tokens.sequenceIndex, 'int32');
    const sums = tf.unsortedSegmentSum(tf.mul(diff, trainableT), seq, tokens.numSequences);
    const counts = tf.maximum(tf.unsortedSegmentSum(trainableT, seq, tokens.numSequences), 1);
    const sequenceRatio = tf.exp(tf.gather(tf.div(sums, counts), seq));
    if (cfg.importanceSamplingLevel === 'sequence') ratio = sequenceRatio;
    else if (cfg.importanceSamplingLevel === 'average') ratio = tf.div(tf.add(ratio, sequenceRatio), 2);
    else ratio = tf.mul(tf.sqrt(ratio), tf.sqrt(sequenceRatio));
  }
  let advantages: tf.Tensor = tf.tensor1d(tokens.advantages);
  if (cfg.maxNegativeAdvantageIsWeight !== null) {
    ratio = tf.where(tf.less(advantages, 0), tf.minimum(ratio, cfg.maxNegativeAdvantageIsWeight), ratio);
  }
  const low = 1 - cfg.epsilon;
  const high = 1 + cfg.epsilonHigh;
  if (cfg.maskProbRatio) {
    // Which tokens are inside is a constant of the step, so the mask is built from the ratio's values off
    // the gradient tape: tfjs has no gradient for LogicalAnd, and PPO's gradient flows through the ratio
    // (comparisons recorded on the tape made every PPO step with mask_prob_ratio throw).
    const values = ratio.dataSync();
    const inside = new Uint8Array(n);
    for (let i = 0; i < n; i++) inside[i] = values[i] > low && values[i] < high ? 1 : 0;
    ratio = tf.where(tf.tensor1d(inside, 'bool'), ratio, tf.zerosLike(ratio));
  }
  if (cfg.kimiK2Tau !== null) advantages = tf.sub(advantages, tf.mul(cfg.kimiK2Tau, stopGradient(diff)));

  let perToken: tf.Tensor;
  if (cfg.lossFn === 'ppo') {
    perToken = tf.neg(tf.minimum(tf.mul(ratio, advantages), tf.mul(tf.clipByValue(ratio, low, high), advantages)));
  } else {
    perToken = tf.neg(tf.mul(tf.mul(stopGradient(tf.clipByValue(ratio, low, high)), advantages), newLogprobs));
  }
  if (cfg.truncatedImportanceSampling !== null) {
    perToken = tf.mul(perToken, stopGradient(tf.minimum(ratio, cfg.truncatedImportanceSampling)));
  }
  const policy = tf.sum(tf.mul(perToken, weights)) as tf.Scalar;

  let kl: tf.Scalar = tf.scalar(0);
  if (cfg.klPenaltyCoef !== 0) {
    if (!tokens.refLogprobs) throw new Error('kl_penalty_coef is set but no reference logprobs were computed');
    // k3 estimator: exp(ref - new) - (ref - new) - 1 >= 0.
    const d = tf.sub(tf.tensor1d(tokens.refLogprobs), newLogprobs);
    kl = tf.sum(tf.mul(tf.sub(tf.sub(tf.exp(d), d), 1), weights)) as tf.Scalar;
  }
  const loss = cfg.klPenaltyCoef !== 0 ? (tf.add(policy, tf.mul(kl, cfg.klPenaltyCoef)) as tf.Scalar) : policy;
  return { loss, policyLoss: policy, kl };
}

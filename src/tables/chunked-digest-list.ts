// A table's ordered row-digest list, stored as content-addressed chunks.
//
// A 1M-row table's digest list is 43 MB; rewriting it for every append would be far too slow.
// Instead a table version is a small index of chunk references (hash, row count, and the SHA-256
// state of the table digest at the chunk's start). Versions share unchanged chunks, so an update
// writes only the chunks it touched, and the table digest is resumed from the first touched
// chunk: an append hashes at most one chunk, not the whole table.

import { createHash } from 'node:crypto';
import type { DigestSequence } from './table-ops.js';
import {
  decodeSha256State,
  encodeSha256State,
  initialSha256State,
  ResumableSha256,
  SHA256_STATE_BYTES,
  type Sha256State,
} from './sha256.js';

/** Rows of a full chunk (~90 KB of digest text). A power of two: see cutRun. */
export const CHUNK_ROWS = 2048;

export interface ChunkRef {
  hash: Buffer; // sha256 of the chunk body (JSON array of its digests)
  count: number;
  startState: Sha256State; // table-digest hash state before this chunk's digests
}

/** A chunk that does not exist in storage yet. */
export interface NewChunk {
  hash: Buffer;
  body: string; // JSON array of row digests
}

export interface FinishedList {
  refs: ChunkRef[];
  newChunks: NewChunk[];
  tableDigest: string;
}

/** Reads a stored chunk; must return a fresh array (the list edits it in place). */
export type ChunkLoader = (hash: Buffer) => string[];

const HASH_BYTES = 32;
const REF_BYTES = HASH_BYTES + 4 + SHA256_STATE_BYTES;

export function encodeChunkIndex(refs: readonly ChunkRef[]): Buffer {
  const blob = Buffer.alloc(refs.length * REF_BYTES);
  refs.forEach((ref, i) => {
    const offset = i * REF_BYTES;
    ref.hash.copy(blob, offset);
    blob.writeUInt32BE(ref.count, offset + HASH_BYTES);
    encodeSha256State(ref.startState, blob, offset + HASH_BYTES + 4);
  });
  return blob;
}

export function decodeChunkIndex(blob: Uint8Array): ChunkRef[] {
  const buffer = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const refs: ChunkRef[] = [];
  for (let offset = 0; offset < buffer.length; offset += REF_BYTES) {
    refs.push({
      hash: Buffer.from(buffer.subarray(offset, offset + HASH_BYTES)),
      count: buffer.readUInt32BE(offset + HASH_BYTES),
      startState: decodeSha256State(buffer, offset + HASH_BYTES + 4),
    });
  }
  return refs;
}

interface WorkingChunk {
  ref: ChunkRef | null; // stored chunk this started from (null: created in this update)
  startState: Sha256State | null; // known only for chunks before or at the first change
  digests: string[] | null; // loaded lazily
  count: number;
  dirty: boolean;
}

/**
 * The digest list of one table version, loaded lazily chunk by chunk and editable in memory.
 * `finish()` re-cuts the edited chunks and computes the new table digest.
 */
export class ChunkedDigestList implements DigestSequence {
  private readonly chunks: WorkingChunk[];
  private total: number;

  constructor(refs: readonly ChunkRef[], private readonly loadChunk: ChunkLoader) {
    this.chunks = refs.map((ref) => ({ ref, startState: ref.startState, digests: null, count: ref.count, dirty: false }));
    this.total = refs.reduce((sum, ref) => sum + ref.count, 0);
  }

  /** A brand-new list (for /table/create): every chunk is new. */
  static fromDigests(digests: readonly string[]): ChunkedDigestList {
    const list = new ChunkedDigestList([], () => {
      throw new Error('a new list has no stored chunks');
    });
    for (let start = 0; start < digests.length; start += CHUNK_ROWS) {
      const piece = digests.slice(start, start + CHUNK_ROWS);
      list.chunks.push({ ref: null, startState: start === 0 ? initialSha256State() : null, digests: piece, count: piece.length, dirty: true });
    }
    list.total = digests.length;
    return list;
  }

  get length(): number {
    return this.total;
  }

  insert(index: number, digest: string): void {
    if (this.chunks.length === 0) {
      this.chunks.push({ ref: null, startState: initialSha256State(), digests: [], count: 0, dirty: false });
    }
    // index == length goes to the end of the last chunk.
    const [chunkIndex, offset] = index === this.total ? [this.chunks.length - 1, this.chunks[this.chunks.length - 1].count] : this.locate(index);
    const digests = this.editableDigests(chunkIndex);
    digests.splice(offset, 0, digest);
    this.chunks[chunkIndex].count++;
    this.total++;
    // Keep each edit O(chunk): many inserts into one chunk would otherwise make every splice O(k).
    if (digests.length > 2 * CHUNK_ROWS) this.splitChunk(chunkIndex);
  }

  remove(index: number): string {
    const [chunkIndex, offset] = this.locate(index);
    const digests = this.editableDigests(chunkIndex);
    const [removed] = digests.splice(offset, 1);
    this.chunks[chunkIndex].count--;
    this.total--;
    return removed;
  }

  /**
   * Re-cut every run of edited chunks (see cutRun) and hash from the first edit onward, resuming
   * from the hash state stored at that chunk. Chunks before it keep their refs untouched.
   */
  finish(): FinishedList {
    if (!this.chunks.some((chunk) => chunk.dirty)) throw new Error('finish() called on an unchanged list');
    this.absorbPartialNeighbours();
    const firstDirty = this.chunks.findIndex((chunk) => chunk.dirty);
    const refs: ChunkRef[] = this.chunks.slice(0, firstDirty).map((chunk) => chunk.ref as ChunkRef);
    const newChunks: NewChunk[] = [];
    const resumeState = this.chunks[firstDirty].startState;
    if (!resumeState) throw new Error('missing hash state at the first edited chunk');
    const hasher = new ResumableSha256(resumeState);

    const emit = (digests: string[], storedHash: Buffer | null): void => {
      let hash = storedHash;
      if (!hash) {
        const body = JSON.stringify(digests);
        hash = createHash('sha256').update(body).digest();
        newChunks.push({ hash, body });
      }
      refs.push({ hash, count: digests.length, startState: hasher.state() });
      hasher.update(Buffer.from(digests.join(''), 'utf8'));
    };

    let i = firstDirty;
    while (i < this.chunks.length) {
      const chunk = this.chunks[i];
      if (!chunk.dirty) {
        emit(this.loadedDigests(i), (chunk.ref as ChunkRef).hash);
        i++;
        continue;
      }
      const run: string[] = [];
      while (i < this.chunks.length && this.chunks[i].dirty) {
        for (const digest of this.chunks[i].digests as string[]) run.push(digest);
        i++;
      }
      for (const piece of cutRun(run)) emit(piece, null);
    }
    return { refs, newChunks, tableDigest: hasher.hexDigest() };
  }

  /**
   * Re-cut partial (non-full) chunks next to an edited one together with it, so small pieces
   * merge instead of piling up (after an edit at most ~log2(CHUNK_ROWS) partial chunks remain).
   */
  private absorbPartialNeighbours(): void {
    const edited = this.chunks.map((chunk) => chunk.dirty);
    const isPartial = (i: number) => !this.chunks[i].dirty && this.chunks[i].count < CHUNK_ROWS;
    edited.forEach((wasEdited, i) => {
      if (!wasEdited) return;
      for (let j = i - 1; j >= 0 && isPartial(j); j--) this.editableDigests(j);
      for (let j = i + 1; j < this.chunks.length && isPartial(j); j++) this.editableDigests(j);
    });
  }

  /** Split an edited chunk in two; both stay edited, so finish() re-cuts and re-hashes them. */
  private splitChunk(chunkIndex: number): void {
    const chunk = this.chunks[chunkIndex];
    const digests = chunk.digests as string[];
    const tail = digests.splice(CHUNK_ROWS);
    chunk.count = digests.length;
    this.chunks.splice(chunkIndex + 1, 0, { ref: null, startState: null, digests: tail, count: tail.length, dirty: true });
  }

  /** Chunk index and offset of a valid position (0 <= index < length). */
  private locate(index: number): [number, number] {
    let remaining = index;
    for (let i = 0; i < this.chunks.length; i++) {
      if (remaining < this.chunks[i].count) return [i, remaining];
      remaining -= this.chunks[i].count;
    }
    throw new RangeError(`position ${index} is outside a list of ${this.total}`);
  }

  private loadedDigests(chunkIndex: number): string[] {
    const chunk = this.chunks[chunkIndex];
    if (!chunk.digests) chunk.digests = this.loadChunk((chunk.ref as ChunkRef).hash);
    return chunk.digests;
  }

  private editableDigests(chunkIndex: number): string[] {
    const digests = this.loadedDigests(chunkIndex);
    this.chunks[chunkIndex].dirty = true;
    return digests;
  }
}

/**
 * Cut a run of digests into full chunks, then the remainder into power-of-two pieces, largest
 * first. Appending a row then changes only the smallest pieces, like incrementing a binary
 * counter: the larger pieces keep their content (and hash), so they are not written again.
 * Amortized, an append writes ~log2(CHUNK_ROWS) digests instead of a whole partial chunk.
 */
export function cutRun(run: readonly string[]): string[][] {
  const pieces: string[][] = [];
  let start = 0;
  while (run.length - start >= CHUNK_ROWS) {
    pieces.push(run.slice(start, start + CHUNK_ROWS));
    start += CHUNK_ROWS;
  }
  for (let size = CHUNK_ROWS / 2; size >= 1; size /= 2) {
    if (run.length - start >= size) {
      pieces.push(run.slice(start, start + size));
      start += size;
    }
  }
  return pieces;
}

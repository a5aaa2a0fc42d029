import type { Statement } from 'better-sqlite3';
import type { Db } from './database.js';
import type { UsageRecord } from '../records.js';

interface Row { entity: string; project: string; model: string; requests: number; prompt_tokens: number; completion_tokens: number }

export class UsageRepo {
  /**
   * Compiled once: every inference request books its usage, and compiling this upsert each time was about half
   * of the booking's ~0.1 ms of API CPU per request (profiled, 2 cores).
   */
  private readonly upsert: Statement<[string, string, string, number, number]>;

  constructor(private readonly db: Db) {
    this.upsert = db.prepare(
      `INSERT INTO usage (entity, project, model, requests, prompt_tokens, completion_tokens) VALUES (?, ?, ?, 1, ?, ?)
       ON CONFLICT (entity, project, model) DO UPDATE SET requests = requests + 1,
         prompt_tokens = prompt_tokens + excluded.prompt_tokens, completion_tokens = completion_tokens + excluded.completion_tokens`,
    );
  }

  add(u: { entity: string; project: string; model: string; promptTokens: number; completionTokens: number }): void {
    this.upsert.run(u.entity, u.project, u.model, u.promptTokens, u.completionTokens);
  }

  list(entity: string): UsageRecord[] {
    return (this.db.prepare('SELECT * FROM usage WHERE entity = ? ORDER BY project, model').all(entity) as Row[]).map((r) => ({
      entity: r.entity, project: r.project, model: r.model, requests: r.requests, promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens,
    }));
  }
}

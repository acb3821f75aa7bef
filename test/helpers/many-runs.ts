import assert from 'node:assert/strict';
import type { ListRunsQuery, RunStore } from '../../models/stores.js';
import type { NewRun } from '../../models/types.js';

/**
 * Creates the runs through the store's own `create` (so every index a create keeps is written as
 * a submission writes it), `concurrency` at a time; returns their ids in `specs` order.
 */
export async function createMany(runs: Pick<RunStore, 'create'>, specs: NewRun[], concurrency = 500): Promise<string[]> {
  for (let i = 0; i < specs.length; i += concurrency) {
    const created = await Promise.all(specs.slice(i, i + concurrency).map((s) => runs.create(s)));
    for (const c of created) assert.equal(c.outcome, 'created');
  }
  return specs.map((s) => s.run_id);
}

/** Every page of a listing, following `next` until it is null: the ids in order, and how many pages. */
export async function listAll(runs: Pick<RunStore, 'list'>, accountId: string, q: Omit<ListRunsQuery, 'before'>, maxPages = 100): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let before: string | undefined;
  for (let pages = 1; pages <= maxPages; pages++) {
    const page = await runs.list(accountId, { ...q, before });
    ids.push(...page.runs.map((r) => r.run_id));
    if (page.next === null) return { ids, pages };
    before = page.next;
  }
  throw new Error(`the listing had not ended after ${maxPages} pages`);
}

/** The ids at `positions` of `ids` (creation order), newest first: what a listing of them answers. */
export const newestFirst = (ids: string[], positions: Iterable<number>): string[] => [...positions].sort((a, b) => b - a).map((i) => ids[i]);

/**
 * Why a ranked model's queued jobs wait, as the instance that last tried to form their pipeline
 * saw it: the ranks no free worker allowed by the placement rule could hold.
 */
export class RankWaits {
  private readonly byQueue = new Map<string, { missing: number[]; count: number; at: number }>();

  set(queue: string, missing: number[], count: number): void {
    if (missing.length) this.byQueue.set(queue, { missing, count, at: Date.now() });
    else this.byQueue.delete(queue);
  }

  get(queue: string): { missing: number[]; count: number } | undefined {
    return this.byQueue.get(queue);
  }
}

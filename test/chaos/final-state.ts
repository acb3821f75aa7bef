import http from 'node:http';
import type { FinalRun } from './history.js';

/** Reads a run's whole event log: a resume from 0 of a run that is over sends it all, then closes. */
function readLog(base: string, apiKey: string, runId: string): Promise<FinalRun['log']> {
  return new Promise((resolve, reject) => {
    const headers = { accept: 'text/event-stream', authorization: `Bearer ${apiKey}`, 'last-event-id': '0' };
    const req = http.get(`${base}/v1/jobs/${runId}/events`, { headers, agent: false, timeout: 10_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        // The server closes after done; a run that is not over would not: stop there anyway.
        if (/\nevent: done\n[^\n]*\n\n/.test(text) || text.startsWith('event: done')) res.destroy();
      });
      res.once('close', () => {
        const log: FinalRun['log'] = [];
        for (const block of text.split('\n\n')) {
          let id: number | undefined;
          let event: string | undefined;
          let data: any;
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) id = Number(line.slice(4));
            else if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data = JSON.parse(line.slice(6));
          }
          if (id === undefined || !event) continue;
          log.push(event === 'status' ? { id, event, status: data?.status, terminal: data?.terminal } : { id, event });
        }
        resolve(log);
      });
    });
    req.once('timeout', () => req.destroy(new Error(`event log of ${runId}: timed out`)));
    req.once('error', reject);
  });
}

async function getJson(url: string, apiKey: string): Promise<any> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * The system at rest, read through the public API of a live gateway: every run of the account
 * (the listing, so a run created by a submission whose answer never arrived is counted too),
 * each with its job object and whole event log, and the account's balance.
 */
export async function readFinalState(base: string, apiKey: string, terminalAt: Map<string, number>) {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { data: Array<{ run_id: string }>; next_cursor: string | null } = await getJson(`${base}/v1/jobs?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, apiKey);
    ids.push(...page.data.map((j) => j.run_id));
    cursor = page.next_cursor;
  } while (cursor);
  const runs = new Map<string, FinalRun>();
  for (let i = 0; i < ids.length; i += 16) {
    await Promise.all(
      ids.slice(i, i + 16).map(async (id) => {
        const job = await getJson(`${base}/v1/jobs/${id}`, apiKey);
        const log = job.terminal ? await readLog(base, apiKey, id) : [];
        runs.set(id, {
          runId: id,
          status: job.status,
          errorCode: job.error?.code ?? null,
          terminal: job.terminal,
          charged: job.cost?.charged ?? null,
          reserved: job.cost?.reserved ?? 0,
          attemptHistory: job.attempt_history ?? [],
          log,
          terminalSeenAt: terminalAt.get(id) ?? null,
        });
      }),
    );
  }
  const account = await getJson(`${base}/v1/account`, apiKey);
  return { runs, credits: account.credits as number, reserved: account.reserved as number };
}

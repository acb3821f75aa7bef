/**
 * What a command's stdout lines say (docs/engines.md, "command"): plain words or one JSON object
 * a line. A line that is neither is just a log line: a program written without Switchyard in
 * mind still works, its chatter shows in the job's logs.
 */
export type ProtocolEvent =
  | { type: 'progress'; progress: number; message?: string }
  | { type: 'log'; line: string }
  | { type: 'output'; delta: string }
  | { type: 'result'; fields: Record<string, unknown> };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function fromJson(line: string): ProtocolEvent[] | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (!isObject(value)) return null;
  const events: ProtocolEvent[] = [];
  if (typeof value.progress === 'number' && Number.isFinite(value.progress)) {
    events.push({ type: 'progress', progress: value.progress, ...(typeof value.message === 'string' ? { message: value.message } : {}) });
  }
  if (typeof value.log === 'string') events.push({ type: 'log', line: value.log });
  if (typeof value.output === 'string') events.push({ type: 'output', delta: value.output });
  if (isObject(value.result)) events.push({ type: 'result', fields: value.result });
  // JSON the protocol does not know is still worth seeing.
  return events.length ? events : null;
}

/** The events of one stdout line (usually one; a JSON line may carry several keys). */
export function parseLine(line: string): ProtocolEvent[] {
  if (line.startsWith('{')) {
    const events = fromJson(line);
    if (events) return events;
  }
  const m = /^(progress|log|output)(?: (.*))?$/s.exec(line);
  if (m) {
    const rest = m[2] ?? '';
    if (m[1] === 'log') return [{ type: 'log', line: rest }];
    if (m[1] === 'output') return [{ type: 'output', delta: rest }];
    const p = /^(\S+)(?: (.*))?$/s.exec(rest);
    const value = p ? Number(p[1]) : NaN;
    if (p && p[1] !== '' && Number.isFinite(value)) return [{ type: 'progress', progress: value, ...(p[2] ? { message: p[2] } : {}) }];
  }
  return [{ type: 'log', line }];
}

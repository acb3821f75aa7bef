export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

const unescape = (v: string) => v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));

/**
 * A Prometheus text exposition (format 0.0.4) read back: the `# TYPE` of each family and
 * every sample, so tests can ask for a series by its labels. Small on purpose: it reads what
 * prom-client writes, and throws on any line it does not understand.
 */
export class Exposition {
  readonly types = new Map<string, string>();
  readonly samples: Sample[] = [];

  constructor(readonly text: string) {
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('# HELP ')) continue;
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) {
        this.types.set(type[1], type[2]);
        continue;
      }
      const m = SAMPLE.exec(line);
      if (!m) throw new Error(`not an exposition line: ${line}`);
      const labels: Record<string, string> = {};
      for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]] = unescape(l[2]);
      this.samples.push({ name: m[1], labels, value: m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : Number(m[3]) });
    }
  }

  /** Samples of `name` whose labels include `labels`. */
  series(name: string, labels: Record<string, string> = {}): Sample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** The one sample of `name` with exactly these labels (undefined if none). */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    const keys = Object.keys(labels);
    return this.series(name, labels).find((s) => Object.keys(s.labels).length === keys.length)?.value;
  }

  /** The sum over every sample of `name` whose labels include `labels`. */
  sum(name: string, labels: Record<string, string> = {}): number {
    return this.series(name, labels).reduce((n, s) => n + s.value, 0);
  }

  /** The family a sample belongs to: a histogram's _bucket/_sum/_count map to its name. */
  familyOf(name: string): string {
    if (this.types.has(name)) return name;
    const base = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
    return base && this.types.has(base) ? base : name;
  }
}

// Which metric names a PromQL expression (or a Grafana dashboard, or a rules file) refers to,
// and whether a Prometheus text exposition exports them: the dashboards must only ask for
// series the gateway really serves, or their panels stay empty without any error.

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'atan2']);

/** Series Prometheus itself writes for every target; the gateway cannot export them. */
export const PROMETHEUS_SYNTHETIC = new Set(['up']);

/**
 * Metric names selected by `expr`: every identifier that is not a function or aggregation
 * (followed by `(`), not a keyword, and not a label name (inside `{...}` or a
 * by/without/on/ignoring/group_x list). Strings and range selectors are blanked first, so
 * Grafana variables such as `$kind` or `[$__rate_interval]` never look like names.
 */
export function metricNames(expr: string): string[] {
  const blanked = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\[[^\]]*\]/g, '[]')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  // Numbers and durations (0.99, 1e3, 5m) are consumed whole so their letters are not names.
  const token = /\d[\w.]*|[a-zA-Z_:][a-zA-Z0-9_:]*|\S/g;
  for (let m = token.exec(blanked); m; m = token.exec(blanked)) {
    const t = m[0];
    if (!/^[a-zA-Z_:]/.test(t) || KEYWORDS.has(t)) continue;
    if (/^\s*\(/.test(blanked.slice(token.lastIndex))) continue;
    names.add(t);
  }
  return [...names];
}

/** `# TYPE name type` lines of an exposition, as name -> type. */
export function exportedTypes(exposition: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1], m[2]);
  return types;
}

/** The family a name belongs to: a histogram's _bucket/_sum/_count series map to its base name. */
export function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (!m) return undefined;
  const type = types.get(m[1]);
  if (type === 'histogram' || (type === 'summary' && m[2] !== 'bucket')) return m[1];
  return undefined;
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

/** Every query of a Grafana dashboard: each target's expr, in rows' nested panels too, and the variables' label_values metrics. */
export function dashboardQueries(dashboard: { panels?: Panel[]; templating?: { list?: { type: string; query?: unknown }[] } }): { where: string; expr: string }[] {
  const out: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[] = []) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}"`, expr: t.expr ?? '' });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== 'query') continue;
    const q = typeof v.query === 'string' ? v.query : (v.query as { query?: string })?.query ?? '';
    // label_values(metric, label): the second argument is a label, not a metric.
    const m = /^label_values\(\s*([^,]+),\s*\w+\s*\)$/.exec(q);
    out.push({ where: `variable query "${q}"`, expr: m ? m[1] : q });
  }
  return out;
}

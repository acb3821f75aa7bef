/**
 * The request a form makes, as code a user can copy: curl, TypeScript (@switchyard/client),
 * Python (sdk/python) and Go (sdk/go). The key is always read from SWITCHYARD_API_KEY, never
 * written out; the gateway's URL is the page's own.
 */

export interface SnippetRequest {
  baseUrl: string;
  kind: string;
  input: Record<string, unknown>;
  /** Sent only when not the gateway's default (open, standard). */
  confidentiality?: string;
  class?: string;
}

export type SnippetLanguage = 'curl' | 'typescript' | 'python' | 'go';

export const SNIPPET_LANGUAGES: Array<{ id: SnippetLanguage; label: string }> = [
  { id: 'curl', label: 'curl' },
  { id: 'typescript', label: 'TypeScript' },
  { id: 'python', label: 'Python' },
  { id: 'go', label: 'Go' },
];

/** The JSON body of POST /v1/jobs. */
export function requestBody(r: SnippetRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { kind: r.kind, input: r.input };
  if (r.confidentiality) body.confidentiality = r.confidentiality;
  if (r.class) body.class = r.class;
  return body;
}

export function snippet(lang: SnippetLanguage, r: SnippetRequest): string {
  switch (lang) {
    case 'curl':
      return curlSnippet(r);
    case 'typescript':
      return typescriptSnippet(r);
    case 'python':
      return pythonSnippet(r);
    case 'go':
      return goSnippet(r);
  }
}

/** A POSIX shell single-quoted word: a ' inside becomes '\''. */
const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

function curlSnippet(r: SnippetRequest): string {
  return [
    `curl -sS -X POST ${shellQuote(`${r.baseUrl}/v1/jobs`)} \\`,
    `  -H "Authorization: Bearer $SWITCHYARD_API_KEY" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d ${shellQuote(JSON.stringify(requestBody(r)))}`,
  ].join('\n');
}

const indentAfterFirst = (text: string, pad: string): string => text.split('\n').join(`\n${pad}`);

function typescriptSnippet(r: SnippetRequest): string {
  const extra = [r.confidentiality ? `  confidentiality: ${JSON.stringify(r.confidentiality)},` : '', r.class ? `  class: ${JSON.stringify(r.class)},` : ''].filter(Boolean);
  return [
    `import { SwitchyardClient } from '@switchyard/client';`,
    ``,
    `const sy = new SwitchyardClient({ baseUrl: ${JSON.stringify(r.baseUrl)}, apiKey: process.env.SWITCHYARD_API_KEY });`,
    `const run = await sy.submit({`,
    `  kind: ${JSON.stringify(r.kind)},`,
    `  input: ${indentAfterFirst(JSON.stringify(r.input, null, 2), '  ')},`,
    ...extra,
    `});`,
    `const job = await sy.wait(run.run_id, { timeoutMs: 600_000 });`,
    `console.log(job.status, job.output?.urls);`,
  ].join('\n');
}

/** A JSON value as a Python literal (true/false/null spelled the Python way). */
function pythonLiteral(v: unknown, indent = ''): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number' || typeof v === 'string') return JSON.stringify(v);
  const inner = `${indent}    `;
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return `[\n${v.map((x) => `${inner}${pythonLiteral(x, inner)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (!entries.length) return '{}';
  return `{\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${pythonLiteral(x, inner)},`).join('\n')}\n${indent}}`;
}

function pythonSnippet(r: SnippetRequest): string {
  const kw = [r.confidentiality ? `, confidentiality=${JSON.stringify(r.confidentiality)}` : '', r.class ? `, job_class=${JSON.stringify(r.class)}` : ''].join('');
  return [
    `import switchyard`,
    ``,
    `# The key comes from SWITCHYARD_API_KEY.`,
    `client = switchyard.Client(${JSON.stringify(r.baseUrl)})`,
    `run = client.submit(${JSON.stringify(r.kind)}, ${pythonLiteral(r.input)}${kw})`,
    `job = client.wait(run.run_id, timeout=600)`,
    `print(job.status, job.output.urls if job.output else None)`,
  ].join('\n');
}

/** A JSON value as a Go literal of `any` (maps, slices, float64 numbers as encoding/json has them). */
function goLiteral(v: unknown, indent = ''): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (typeof v === 'string') return JSON.stringify(v);
  const inner = `${indent}\t`;
  if (Array.isArray(v)) return `[]any{${v.length ? `\n${v.map((x) => `${inner}${goLiteral(x, inner)},`).join('\n')}\n${indent}` : ''}}`;
  const entries = Object.entries(v as Record<string, unknown>);
  return `map[string]any{${entries.length ? `\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${goLiteral(x, inner)},`).join('\n')}\n${indent}` : ''}}`;
}

function goSnippet(r: SnippetRequest): string {
  const fields = [
    `\t\tKind:  ${JSON.stringify(r.kind)},`,
    `\t\tInput: ${goLiteral(r.input, '\t\t')},`,
    r.confidentiality ? `\t\tConfidentiality: ${JSON.stringify(r.confidentiality)},` : '',
    r.class ? `\t\tClass: ${JSON.stringify(r.class)},` : '',
  ].filter(Boolean);
  return [
    `package main`,
    ``,
    `import (`,
    `\t"context"`,
    `\t"fmt"`,
    `\t"log"`,
    `\t"os"`,
    `\t"time"`,
    ``,
    `\tswitchyard "github.com/switchyard-dev/switchyard/sdk/go"`,
    `)`,
    ``,
    `func main() {`,
    `\tclient, err := switchyard.NewClient(${JSON.stringify(r.baseUrl)}, switchyard.WithAPIKey(os.Getenv("SWITCHYARD_API_KEY")))`,
    `\tif err != nil {`,
    `\t\tlog.Fatal(err)`,
    `\t}`,
    `\tctx := context.Background()`,
    `\trun, err := client.Submit(ctx, switchyard.SubmitRequest{`,
    ...fields,
    `\t})`,
    `\tif err != nil {`,
    `\t\tlog.Fatal(err)`,
    `\t}`,
    `\tjob, err := client.Wait(ctx, run.RunID, switchyard.WaitOptions{Interval: time.Second, Timeout: 10 * time.Minute})`,
    `\tif err != nil {`,
    `\t\tlog.Fatal(err)`,
    `\t}`,
    `\tfmt.Println(job.Status)`,
    `\tif job.Output != nil {`,
    `\t\tfor _, u := range job.Output.URLs {`,
    `\t\t\tfmt.Println(u)`,
    `\t\t}`,
    `\t}`,
    `}`,
  ].join('\n');
}

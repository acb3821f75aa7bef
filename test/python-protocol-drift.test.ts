import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as protocol from '../sdk/protocol/index.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const PROTOCOL_PY = path.join(ROOT, 'sdk/python/worker/switchyard_worker/protocol.py');

/**
 * The top-level constants of protocol.py, read as text (no python3 needed, so this runs
 * everywhere): integers (`1_000`, `64 * 1024`), strings, tuples of integers and `re.compile(r"...")`
 * patterns. A constant written some other way is left out, so the comparison below names it.
 */
function pythonConstants(source: string): Map<string, unknown> {
  const constants = new Map<string, unknown>();
  for (const [, name, value] of source.matchAll(/^([A-Z][A-Z0-9_]*) = (.+?)\s*(?:#.*)?$/gm)) {
    const int = (s: string) => Number(s.replace(/_/g, ''));
    let m: RegExpMatchArray | null;
    if ((m = value.match(/^re\.compile\(r"([^"]*)"\)$/)) || (m = value.match(/^"([^"\\]*)"$/))) constants.set(name, m[1]);
    else if (/^\d[\d_]*( \* \d[\d_]*)*$/.test(value)) constants.set(name, value.split(' * ').map(int).reduce((a, b) => a * b));
    else if ((m = value.match(/^\(((?:\d+, )*\d+),?\)$/))) constants.set(name, m[1].split(', ').map(int));
  }
  return constants;
}

/**
 * The Python worker SDK writes the wire contract down again (it cannot import sdk/protocol/): the
 * versions it offers, the first version of each feature, the frame limits, the identity and model
 * id patterns, the 4409 close. Every constant sdk/protocol/index.ts exports must be in
 * protocol.py with the same value, so the two cannot drift apart (protocol.py once offered 1-3
 * while the gateway spoke 5).
 */
describe('the Python worker SDK speaks the wire contract of sdk/protocol/', () => {
  const python = pythonConstants(readFileSync(PROTOCOL_PY, 'utf8'));
  const contract = Object.entries(protocol).filter(([, value]) => typeof value !== 'function');

  it('reads the constants of protocol.py', () => {
    // The parser above must keep up with the file: these forms are the ones it uses.
    assert.deepEqual(python.get('WORKER_PATH'), '/v1/workers/connect');
    assert.ok(contract.length >= 20, `${contract.length} constants exported by sdk/protocol/index.ts`);
  });

  it('protocol.py has every constant of sdk/protocol/index.ts, with the same value', () => {
    const differ = contract
      .filter(([name, value]) => !python.has(name) || JSON.stringify(python.get(name)) !== JSON.stringify(value))
      .map(([name, value]) => `${name}: sdk/protocol has ${JSON.stringify(value)}, protocol.py ${python.has(name) ? JSON.stringify(python.get(name)) : 'has none (or one this test cannot read)'}`);
    assert.deepEqual(differ, [], `sdk/python/worker/switchyard_worker/protocol.py differs from sdk/protocol/:\n${differ.join('\n')}`);
  });
});

import { useState } from 'preact/hooks';
import { CopyButton, ErrorNote } from '../components/common.js';
import { publicUrl } from '../lib/gateway.js';
import { mintWorkerToken } from './account-api.js';
import { SecretPanel } from './secret-panel.js';
import { pythonWorker, SIMPLE_ENGINES, workerCommand, type SimpleEngine } from './worker-command.js';

/**
 * Worker tokens (POST /v1/account/worker-tokens): an open-trust token for the account's own
 * machines, shown once with the command that connects a worker with it.
 */
export function WorkerTokenSection({ kinds }: { kinds: string[] }) {
  const [token, setToken] = useState<string | null>(null);
  const [engine, setEngine] = useState<SimpleEngine>('demo');
  const [kind, setKind] = useState('all');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const mint = async () => {
    setBusy(true);
    setError(null);
    try {
      setToken((await mintWorkerToken()).worker_token);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const command = token ? workerCommand(publicUrl, token, engine, kind) : '';
  const python = token ? pythonWorker(publicUrl, token) : '';
  return (
    <section class="account-section" aria-labelledby="workers-title">
      <h2 id="workers-title">Worker tokens</h2>
      <p class="hint">
        A worker token connects a machine of yours to this gateway as a worker (open tier). It goes out through a WebSocket: no port to open.
      </p>
      <button type="button" class="button-primary" disabled={busy} onClick={() => void mint()}>
        Mint a worker token
      </button>
      <ErrorNote error={error} />
      {token ? (
        <SecretPanel title="New worker token" secret={token} label="worker token" onDismiss={() => setToken(null)}>
          <div class="row worker-options">
            <div>
              <label for="worker-engine">Engine</label>
              <select id="worker-engine" value={engine} onChange={(e) => setEngine(e.currentTarget.value as SimpleEngine)}>
                {SIMPLE_ENGINES.map((e) => (
                  <option key={e.name} value={e.name}>
                    {e.label}
                  </option>
                ))}
              </select>
            </div>
            {engine === 'demo' ? (
              <div>
                <label for="worker-kinds">Kinds</label>
                <select id="worker-kinds" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
                  <option value="all">all</option>
                  {kinds.map((k) => (
                    <option key={k} value={k}>
                      {k}
                    </option>
                  ))}
                </select>
              </div>
            ) : null}
          </div>
          <h4>Run a worker</h4>
          <pre data-worker-command>{command}</pre>
          <CopyButton text={command} label="Copy the command" />
          <p class="hint">
            Other engines (OpenAI-compatible servers, ComfyUI, Cog, any command) take flags of their own: see docs/engines.md.
          </p>
          <h4>Or a worker in Python</h4>
          <pre data-python-worker>{python}</pre>
          <CopyButton text={python} label="Copy the Python worker" />
        </SecretPanel>
      ) : null}
    </section>
  );
}

import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { JobEvent, JobResult, JsonObject, LogData, ProgressData } from '../../../sdk/client/index.js';
import { client } from '../lib/gateway.js';
import { RunFollower, type Connection } from './run-follower.js';

/** How often a queued run's place in the queue is asked again (logged events do not carry it). */
const QUEUE_POLL_MS = 2000;

export interface LogLine extends LogData {
  /** The event's number: the key of the line, and proof it was not shown twice. */
  id: number;
}

export interface RunState {
  job: JobResult | undefined;
  /** What the run was asked (GET ?include=input): events carry no input, so it is kept apart from `job`. */
  input: JsonObject | undefined;
  /** The last GET of a queued run: its queue position and why it waits. */
  queue: Pick<JobResult, 'status' | 'queue_position' | 'waiting_reason' | 'waiting_ranks'> | undefined;
  loadError: unknown;
  logs: LogLine[];
  text: string;
  progress: ProgressData | undefined;
  connection: Connection;
  retryInMs: number | undefined;
  streamError: unknown;
  /** Takes a job the page got another way (the answer of a cancel). */
  setJob(job: JobResult): void;
}

/**
 * A run as the page shows it: the job and its input from GET /v1/jobs/{id}?include=input, then every event of its log from
 * the first (RunFollower), so log lines and streamed text are the whole history whether the
 * run is live or long over. Status events replace the job; a queued run's place in the queue
 * comes from polling, because logged events carry no queue position.
 */
export function useRun(runId: string): RunState {
  const [job, setJobState] = useState<JobResult>();
  const [input, setInput] = useState<JsonObject>();
  const [queue, setQueue] = useState<RunState['queue']>();
  const [loadError, setLoadError] = useState<unknown>();
  const [logs, setLogs] = useState<LogLine[]>([]);
  const [text, setText] = useState('');
  const [progress, setProgress] = useState<ProgressData>();
  const [connection, setConnection] = useState<Connection>('connecting');
  const [retryInMs, setRetryInMs] = useState<number>();
  const [streamError, setStreamError] = useState<unknown>();
  // Whether the stream has given a status yet: until then the GET's answer is the newest.
  const streamed = useRef(false);

  useEffect(() => {
    setJobState(undefined);
    setInput(undefined);
    setLogs([]);
    setText('');
    setProgress(undefined);
    setLoadError(undefined);
    streamed.current = false;
    let live = true;
    client()
      .get(runId, { include: ['input'] })
      .then(
        (j) => {
          if (!live) return;
          setInput(j.input);
          setQueue(j);
          if (!streamed.current) setJobState(j);
        },
        (err: unknown) => live && setLoadError(err),
      );
    const onEvent = (ev: JobEvent) => {
      switch (ev.event) {
        case 'status':
        case 'done':
          streamed.current = true;
          setJobState(ev.data);
          break;
        case 'progress':
          setProgress(ev.data);
          break;
        case 'log':
          setLogs((l) => [...l, { ...ev.data, id: ev.id }]);
          break;
        case 'output':
          setText((t) => t + ev.data.delta);
          break;
      }
    };
    const follower = new RunFollower(runId, {
      event: (ev) => live && onEvent(ev),
      connection: (state, detail) => {
        if (!live) return;
        setConnection(state);
        setRetryInMs(detail?.retryInMs);
        setStreamError(detail?.error);
      },
    });
    void follower.run();
    return () => {
      live = false;
      follower.stop();
    };
  }, [runId]);

  // A queued run: ask where it stands in the queue until it leaves it.
  const queued = job?.status === 'queued';
  useEffect(() => {
    if (!queued) return;
    let live = true;
    const t = setInterval(() => {
      client()
        .get(runId)
        .then((j) => live && setQueue(j))
        .catch(() => undefined);
    }, QUEUE_POLL_MS);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [runId, queued]);

  // The cancel's answer (still `running`, the worker told to stop) can arrive after the stream's
  // `done`: an ended run is final and the stream has nothing more to correct it with.
  const setJob = useCallback((j: JobResult) => setJobState((now) => (now?.terminal && !j.terminal ? now : j)), []);
  return { job, input, queue, loadError, logs, text, progress, connection, retryInMs, streamError, setJob };
}

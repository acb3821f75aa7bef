/**
 * How a command's run failed, as the lease failure the worker SDK reports (it reads `code` and
 * `retryable`, docs/engines.md "command"):
 *
 * - `command_failed`, retryable: a non-zero exit status other than BAD_INPUT_EXIT, or a signal
 *   the worker did not send. Another attempt, here or elsewhere, may succeed.
 * - `bad_input`, not retryable: the program exited with BAD_INPUT_EXIT, saying the input is wrong.
 * - `command_timeout`, not retryable: it ran past `--command-timeout`; the same input would most
 *   likely run as long again, holding a slot for the whole limit each time.
 * - `command_not_found`, retryable: the program could not be started on this worker.
 */
export type CommandErrorCode = 'command_failed' | 'bad_input' | 'command_timeout' | 'command_not_found' | 'bad_output';

/** The exit status by which a program says its input is wrong: the job fails for good. */
export const BAD_INPUT_EXIT = 3;

export class CommandError extends Error {
  override readonly name = 'CommandError';
  constructor(
    readonly code: CommandErrorCode,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/**
 * `GET /v1/jobs/{run_id}?include=input`: the job object, and on request its input. The input is
 * left out everywhere else (listings, events, webhooks, the 202): an input can be megabytes.
 */

/** What `include` may name, comma-separated. */
export const JOB_INCLUDES = ['input'] as const;

export const getJobQuery = {
  type: 'object',
  properties: {
    include: {
      type: 'string',
      maxLength: 200,
      description: `Comma-separated extra fields of the job object: ${JOB_INCLUDES.map((i) => `\`${i}\``).join(', ')}. An unknown one is a 400.`,
    },
  },
} as const;

/** The job object's `input`, present only when `include=input` asked for it. */
export const jobInputField = {
  input: {
    type: 'object',
    additionalProperties: true,
    description:
      'Only from `GET /v1/jobs/{run_id}?include=input`: the input as the gateway stored it and leased it to workers. Each file field holds the reference the run used: a file id (`file_...`, also for a file the gateway made from an https URL or data: URI), or an artifact URL as given.',
  },
} as const;

/** What a job reserved at submission and was charged when it ended (docs/jobs.md, "Cost"). */
export interface JobCost {
  /** Credits held at submission: the most the job can cost. */
  reserved: number;
  /** Credits taken when it ended (0 unless it succeeded, never more than `reserved`); null until then. */
  charged: number | null;
}

/** What a job's worker reported it used; a unit it did not report is absent. */
export interface JobUsage {
  input_tokens?: number;
  output_tokens?: number;
  /** Seconds of output (audio, video). */
  seconds?: number;
  images?: number;
}

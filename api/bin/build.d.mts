/** Declarations of api/bin/build.mjs, for the tests and benchmarks that import it. */
export declare const ROOT: string;
export declare const STAMP: string;
/** True when there is no build yet or an input changed since the last one. */
export declare function isStale(): boolean;
/** Runs every tsc project and copies the assets; throws with tsc's output on an error ('warn': type errors are printed, the build goes on). */
export declare function build(opts?: { quiet?: boolean; typeErrors?: 'fail' | 'warn' }): void;

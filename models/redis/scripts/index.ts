/**
 * Every Redis script of the gateway, one file each in this folder (shared Lua fragments in
 * includes/), as BullMQ keeps its own in `commands/`. `RedisScripts` (../redis-scripts.ts) runs
 * them by these names; test/redis-scripts.test.ts fails on a file of this folder missing here.
 */
export { adjustCredits } from './adjust-credits.js';
export { admitBotMessage } from './admit-bot-message.js';
export { admitRun } from './admit-run.js';
export { adoptLease } from './adopt-lease.js';
export { advertiseModels } from './advertise-models.js';
export { appendConversation } from './append-conversation.js';
export { appendRunEvents } from './append-run-events.js';
export { buildRunIndex } from './build-run-index.js';
export { claimRankSeats } from './claim-rank-seats.js';
export { claimWebhookEvents } from './claim-webhook-events.js';
export { createBatch } from './create-batch.js';
export { createFile } from './create-file.js';
export { createClaimedRun } from './create-claimed-run.js';
export { createRun } from './create-run.js';
export { createTool } from './create-tool.js';
export { declareModel } from './declare-model.js';
export { deleteBot } from './delete-bot.js';
export { deleteFile } from './delete-file.js';
export { deleteTool } from './delete-tool.js';
export { dropStaleRuns } from './drop-stale-runs.js';
export { gatedCreateRun } from './gated-create-run.js';
export { readFleetCounts } from './read-fleet-counts.js';
export { releaseClaim } from './release-claim.js';
export { releaseRun } from './release-run.js';
export { releaseRankSeats } from './release-rank-seats.js';
export { removeModel } from './remove-model.js';
export { requestGate } from './request-gate.js';
export { retireFleetWorker } from './retire-fleet-worker.js';
export { revokeApiKey } from './revoke-api-key.js';
export { setAccountLimits } from './set-account-limits.js';
export { setKeyMaxRunning } from './set-key-max-running.js';
export { setOperatorTrust } from './set-operator-trust.js';
export { transitionRun } from './transition-run.js';
export { uncountAttempt } from './uncount-attempt.js';
export { writeWebhookSecret } from './write-webhook-secret.js';

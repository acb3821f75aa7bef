import { AgentLoop } from '../services/bots/agent-loop.js';
import { BotRateLimiter } from '../services/bots/bot-rate-limiter.js';
import { BotService } from '../services/bots/bot-service.js';
import { BotTurns } from '../services/bots/bot-turns.js';
import { BotSocketServer } from '../sockets/bot-socket-server.js';
import type { Callers } from './callers.js';
import type { Core } from './core.js';
import type { Outbound } from './outbound.js';

/** Bots (docs/bots.md): their records, their turns (the agent loop on llm jobs paid by the owner) and their socket. */
export interface Bots {
  bots: BotService;
  botTurns: BotTurns;
  botServer: BotSocketServer;
}

export function buildBots(core: Core, callers: Callers, outbound: Outbound): Bots {
  const { config: c, log } = core;
  const bots = new BotService({ store: core.stores.bots, auth: core.auth, gate: core.gate, tools: outbound.tools, publicUrl: core.publicUrl.get, config: c, models: callers.llm });
  const botTurns = new BotTurns({
    bots,
    conversations: core.stores.conversations,
    loop: new AgentLoop({ llm: callers.llm, tools: outbound.tools, maxSteps: c.agents.maxSteps, log }),
    llm: callers.llm,
    limiter: new BotRateLimiter({ redis: core.redis, keys: core.keys, perBotPerMinute: c.agents.botRatePerMinute, perClientPerMinute: c.agents.botClientRatePerMinute }),
  });
  const botServer = new BotSocketServer({ bots, turns: botTurns, log, trustProxy: c.trustProxy, maxMessageBytes: c.jsonBodyLimitBytes, maxDepth: c.jsonMaxDepth });
  return { bots, botTurns, botServer };
}

import { pubsub } from '../../models/redis-pubsub.js';
import type { RedisClient } from '../../models/redis-connection.js';
import type { Logger } from 'pino';
import { RedisKeys } from '../../models/redis/keys.js';
import type { LeaseFrame } from '../../sdk/protocol/index.js';
import type { PipelineSpec } from './pipeline.js';

/** Control messages between the instances holding one pipeline's ranks. */
export type PipelineControl =
  /** The forming instance asks the instance of `rank`'s worker to hold that rank lease and send it `frame`. */
  | { op: 'assign'; pipeline: PipelineSpec; rank: number; frame: LeaseFrame; upload_hash: string }
  /** Its answer: holding it, or why not. */
  | { op: 'assigned'; pipeline_id: string; rank: number; ok: boolean; why?: string }
  /** Every rank is held: the instance sends its ranks their lease frames (the second phase of forming). */
  | { op: 'start'; pipeline_id: string }
  /** A rank before the last reported `complete`: its lease's absence is no loss. */
  | { op: 'done'; pipeline_id: string; rank: number }
  /** The pipeline ended (finished, failed, lost, canceled, or was never formed): drop its rank leases. */
  | { op: 'end'; pipeline_id: string; why: string };

const FRAME = 1;
const ACK = 2;
const CONTROL = 3;

export interface PipelineBusHandlers {
  /** A pipeline frame for a rank lease held here, its header already the receiver's; `from` acks it. */
  frame(frame: Buffer, from: string): void;
  /** `bytes` of frames sent to `leaseId` (on `from`) were written to its worker's socket. */
  ack(leaseId: string, bytes: number, from: string): void;
  control(message: PipelineControl, from: string): void;
}

export interface PipelineBusOptions {
  redis: RedisClient;
  /**
   * A subscriber connection of the bus's own (the bus closes it at stop). Not the gateway's
   * shared one: ioredis decodes every message as text for a connection with `message`
   * listeners, which cost the two-instance path more than half its CPU (docs/benchmarks.md,
   * "Ranks: the activation path"). Made at start.
   */
  subscriber: () => RedisClient;
  prefix: string;
  gatewayId: string;
  log: Logger;
}

/**
 * The path between gateway instances for pipelines whose ranks sit on different instances
 * (docs/ranks.md, "Two instances"): each instance listens on its own Redis pub/sub channel, and
 * activations, their acks and the control messages go to the channel of the instance holding the
 * receiving rank, binary as they are. Pub/sub delivers in order and at most once: a message lost
 * to a reconnect shows as a gap in the receiver's `seq` or a missing answer, and ends the
 * pipeline, whose job then runs again. Redis is the one thing every instance already reaches;
 * a direct instance-to-instance path would need each instance's own address, a port and TLS.
 */
export class PipelineBus {
  private readonly keys: RedisKeys;
  private readonly channel: string;
  private handlers: PipelineBusHandlers | null = null;
  private subscriber: RedisClient | null = null;
  private stopListening: (() => void) | null = null;
  /** Acks not sent yet, by instance and lease: one message per lease per event-loop turn, not per frame. */
  private readonly acks = new Map<string, Map<string, number>>();
  private acking = false;
  private readonly listener = (channel: Buffer, message: Buffer) => {
    if (channel.toString() === this.channel) this.received(message);
  };

  constructor(private readonly opts: PipelineBusOptions) {
    this.keys = new RedisKeys(opts.prefix);
    this.channel = this.keys.pipelineChannel(opts.gatewayId);
  }

  async start(handlers: PipelineBusHandlers): Promise<void> {
    this.handlers = handlers;
    this.subscriber = this.opts.subscriber();
    this.stopListening = pubsub.onMessageBuffer(this.subscriber, this.listener);
    await pubsub.subscribe(this.subscriber, [this.channel]);
  }

  async stop(): Promise<void> {
    const sub = this.subscriber;
    this.subscriber = null;
    if (!sub) return;
    this.stopListening?.();
    this.stopListening = null;
    await sub.quit().catch(() => sub.disconnect());
  }

  /** Sends a pipeline frame (its header the receiver's) to the instance holding the receiving rank. */
  frame(to: string, frame: Buffer): void {
    this.publish(to, Buffer.concat([this.head(FRAME), frame]));
  }

  /** Acknowledges bytes written to `leaseId`'s worker; the acks of one turn go as one message per lease. */
  ack(to: string, leaseId: string, bytes: number): void {
    let byLease = this.acks.get(to);
    if (!byLease) this.acks.set(to, (byLease = new Map()));
    byLease.set(leaseId, (byLease.get(leaseId) ?? 0) + bytes);
    if (this.acking) return;
    this.acking = true;
    setImmediate(() => {
      this.acking = false;
      for (const [gw, leases] of this.acks) {
        for (const [id, n] of leases) {
          const body = Buffer.allocUnsafe(20);
          body.write(id.slice(4), 0, 16, 'hex');
          body.writeUInt32LE(n, 16);
          this.publish(gw, Buffer.concat([this.head(ACK), body]));
        }
      }
      this.acks.clear();
    });
  }

  control(to: string, message: PipelineControl): void {
    this.publish(to, Buffer.concat([this.head(CONTROL), Buffer.from(JSON.stringify(message))]));
  }

  /** The type byte, then who sent it (length-prefixed). */
  private head(type: number): Buffer {
    const from = Buffer.from(this.opts.gatewayId);
    return Buffer.concat([Buffer.from([type, from.length]), from]);
  }

  private publish(to: string, message: Buffer): void {
    pubsub.publish(this.opts.redis, this.keys.pipelineChannel(to), message).catch((err: unknown) => this.opts.log.warn({ err, to }, 'could not send a pipeline message; its pipeline ends when it is missed'));
  }

  private received(message: Buffer): void {
    const handlers = this.handlers;
    if (!handlers || message.length < 2) return;
    const fromEnd = 2 + message[1];
    const from = message.toString('utf8', 2, fromEnd);
    const body = message.subarray(fromEnd);
    try {
      if (message[0] === FRAME) handlers.frame(body, from);
      else if (message[0] === ACK && body.length === 20) handlers.ack(`lse_${body.toString('hex', 0, 16)}`, body.readUInt32LE(16), from);
      else if (message[0] === CONTROL) handlers.control(JSON.parse(body.toString('utf8')) as PipelineControl, from);
    } catch (err) {
      this.opts.log.warn({ err, from }, 'a pipeline message could not be handled');
    }
  }
}

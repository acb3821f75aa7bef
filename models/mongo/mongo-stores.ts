import { MongoClient, type Db } from 'mongodb';
import type { Stores } from '../stores.js';
import { MongoAccountStore, type AccountDoc } from './mongo-account-store.js';
import { MongoApiKeyStore, type ApiKeyDoc } from './mongo-api-key-store.js';
import { MongoBotStore, type BotDoc, type BotSessionDoc, type FlowDoc } from './mongo-bot-store.js';
import { MongoConversationStore, type ConversationDoc } from './mongo-conversation-store.js';
import { MongoIdempotencyStore, type IdempotencyDoc } from './mongo-idempotency-store.js';
import { MongoOperatorStore, MongoWorkerTokenStore, type OperatorDoc, type WorkerTokenDoc } from './mongo-operator-store.js';
import { MongoRunStore, type BatchDoc, type MongoRunStoreOptions, type RunDoc } from './mongo-run-store.js';
import { MongoToolStore, type ToolCountDoc, type ToolDoc } from './mongo-tool-store.js';
import { MongoFileStore, type FileDoc, type FileUsageDoc } from './mongo-file-store.js';
import { MongoModelStore, type ModelDoc } from './mongo-model-store.js';

/**
 * Every store in one MongoDB database. Runs are created and settled in multi-document
 * transactions, so the server must be a replica set (a single-node replica set is enough);
 * a standalone mongod refuses transactions.
 */
export class MongoStores implements Stores {
  readonly accounts: MongoAccountStore;
  readonly apiKeys: MongoApiKeyStore;
  readonly operators: MongoOperatorStore;
  readonly workerTokens: MongoWorkerTokenStore;
  readonly runs: MongoRunStore;
  readonly idempotency: MongoIdempotencyStore;
  readonly bots: MongoBotStore;
  readonly conversations: MongoConversationStore;
  readonly tools: MongoToolStore;
  readonly files: MongoFileStore;
  readonly models: MongoModelStore;

  private constructor(private readonly client: MongoClient, private readonly db: Db, opts: MongoRunStoreOptions) {
    const accounts = db.collection<AccountDoc>('accounts');
    this.accounts = new MongoAccountStore(accounts);
    this.apiKeys = new MongoApiKeyStore(db.collection<ApiKeyDoc>('api_keys'));
    this.operators = new MongoOperatorStore(db.collection<OperatorDoc>('operators'));
    this.workerTokens = new MongoWorkerTokenStore(db.collection<WorkerTokenDoc>('worker_tokens'));
    this.runs = new MongoRunStore(client, db.collection<RunDoc>('runs'), accounts, opts, db.collection<BatchDoc>('batches'), db.collection<IdempotencyDoc>('idempotency'));
    this.idempotency = new MongoIdempotencyStore(db.collection<IdempotencyDoc>('idempotency'));
    this.bots = new MongoBotStore(db.collection<BotDoc>('bots'), db.collection<FlowDoc>('flows'), db.collection<BotSessionDoc>('bot_sessions'));
    this.conversations = new MongoConversationStore(db.collection<ConversationDoc>('conversations'));
    this.tools = new MongoToolStore(client, db.collection<ToolDoc>('tools'), db.collection<ToolCountDoc>('tool_counts'));
    this.files = new MongoFileStore(db.collection<FileDoc>('files'), db.collection<FileUsageDoc>('file_usage'));
    this.models = new MongoModelStore(db.collection<ModelDoc>('models'));
  }

  /** For tests: drops the whole database. */
  async dropDatabase(): Promise<void> {
    await this.db.dropDatabase();
  }

  static async connect(url: string, dbName: string, opts: MongoRunStoreOptions): Promise<MongoStores> {
    const client = await MongoClient.connect(url);
    const stores = new MongoStores(client, client.db(dbName), opts);
    try {
      await stores.ensureIndexes();
    } catch (err) {
      await client.close();
      throw err;
    }
    return stores;
  }

  /**
   * Idempotent: creating an index that exists with the same options is a no-op. It also creates
   * the runs collection, which a transaction cannot do on servers before 4.4.
   */
  async ensureIndexes(): Promise<void> {
    await this.db.collection('api_keys').createIndexes([{ key: { account_id: 1 } }]);
    await this.db.collection('worker_tokens').createIndexes([{ key: { id: 1 }, unique: true }]);
    await this.db.collection('runs').createIndexes([
      // Listing: newest first, one index per filter it takes (status, kind, both), so a page reads
      // only matches. MongoDB builds a new one over the runs already there when it is created.
      { key: { account_id: 1, _id: -1 } },
      { key: { account_id: 1, status: 1, _id: -1 } },
      { key: { account_id: 1, kind: 1, _id: -1 } },
      { key: { account_id: 1, status: 1, kind: 1, _id: -1 } },
      // A batch's runs (listings with batch_id, its counts); sparse: most runs have none.
      { key: { batch_id: 1, _id: -1 }, partialFilterExpression: { batch_id: { $type: 'string' } } },
      // The outbox holds only unconfirmed runs, so its index stays small.
      { key: { unconfirmed_at: 1 }, partialFilterExpression: { unconfirmed_at: { $exists: true } } },
      // Terminal runs get an expires_at; the TTL monitor removes them once it passes.
      { key: { expires_at: 1 }, expireAfterSeconds: 0 },
    ]);
    // A batch goes retention after its last run's end (MongoRunStore sets expires_at then).
    await this.db.collection('batches').createIndexes([{ key: { expires_at: 1 }, expireAfterSeconds: 0 }]);
    await this.db.collection('idempotency').createIndexes([{ key: { expires_at: 1 }, expireAfterSeconds: 0 }]);
    // Bots list by account in id (creation) order; sessions and conversations expire on their own.
    await this.db.collection('bots').createIndexes([{ key: { account_id: 1, _id: 1 } }]);
    await this.db.collection('bot_sessions').createIndexes([{ key: { expire_at: 1 }, expireAfterSeconds: 0 }]);
    await this.db.collection('conversations').createIndexes([{ key: { expire_at: 1 }, expireAfterSeconds: 0 }]);
    // Tool names are unique per account; this index is what enforces it. It also serves listing.
    await this.db.collection('tools').createIndexes([{ key: { account_id: 1, name: 1 }, unique: true }, { key: { account_id: 1, _id: 1 } }]);
    // Files list newest first per account; the retention sweep reads them by expiry (and deletes them itself, freeing quota).
    await this.db.collection('files').createIndexes([{ key: { account_id: 1, _id: -1 } }, { key: { expires_at: 1 } }]);
    // A model is one document per (kind, id): the index makes concurrent first upserts insert one, and serves listing in order.
    await this.db.collection('models').createIndexes([{ key: { kind: 1, id: 1 }, unique: true }]);
    // Creates the counters' collection, which a transaction cannot do on servers before 4.4 (48: it exists).
    await this.db.createCollection('tool_counts').catch((err: { code?: number }) => {
      if (err.code !== 48) throw err;
    });
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 });
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

import { MongoBulkWriteError, type Collection } from 'mongodb';
import type { ModelDescription, ModelStore, RankConflict } from '../stores.js';
import { DEFAULT_MIDDLE_RANKS, type ModelRecord } from '../types.js';
import { isDuplicateKey } from './mongo-errors.js';

/**
 * A model as stored; (kind, id) is unique. The schema is kept as JSON text: JSON Schema's own
 * keys start with `$` (`$ref`, `$defs`) and may hold dots, which MongoDB field names reserve
 * (`$ref` is a DBRef), and as text it comes back byte for byte.
 */
export interface ModelDoc extends Omit<ModelRecord, 'input_schema' | 'ranks' | 'middle_ranks'> {
  input_schema: string | null;
  /** Absent (documents written before ranks) or null: whole. */
  ranks?: number | null;
  middle_ranks?: ModelRecord['middle_ranks'];
}

// Every value of ours goes in as a literal: in a pipeline update a string starting with `$`
// (a description "$5 per image") would otherwise be read as a field path.
const lit = (value: unknown) => ({ $literal: value });
const isDeclared = { $eq: ['$declared', true] };

const schemaText = (m: ModelDescription): string | null => (m.input_schema ? JSON.stringify(m.input_schema) : null);

/**
 * An advertisement as one update of the document, so it and a concurrent declaration are each
 * atomic on it: whichever comes second sees the other's result, and a declared record keeps
 * its description and schema. `updated_at` moves only when what the record says changes.
 */
function advertisement(m: ModelDescription, at: string) {
  const description = m.description ?? null;
  const schema = schemaText(m);
  const unchanged = { $and: [{ $eq: ['$description', lit(description)] }, { $eq: ['$input_schema', lit(schema)] }] };
  return [
    {
      $set: {
        declared: isDeclared,
        description: { $cond: [isDeclared, '$description', lit(description)] },
        input_schema: { $cond: [isDeclared, '$input_schema', lit(schema)] },
        first_seen: { $ifNull: ['$first_seen', lit(at)] },
        last_seen: lit(at),
        created_at: { $ifNull: ['$created_at', lit(at)] },
        updated_at: { $cond: [{ $or: [isDeclared, unchanged] }, { $ifNull: ['$updated_at', lit(at)] }, lit(at)] },
      },
    },
  ];
}

const ranksOf = (d: Pick<ModelDoc, 'ranks'>): number | null => (typeof d.ranks === 'number' && d.ranks > 0 ? d.ranks : null);

const toRecord = (d: ModelDoc): ModelRecord => ({
  kind: d.kind,
  id: d.id,
  description: d.description ?? null,
  input_schema: d.input_schema ? (JSON.parse(d.input_schema) as Record<string, unknown>) : null,
  ranks: ranksOf(d),
  middle_ranks: ranksOf(d) === null ? null : (d.middle_ranks ?? DEFAULT_MIDDLE_RANKS),
  declared: d.declared === true,
  first_seen: d.first_seen ?? null,
  last_seen: d.last_seen ?? null,
  created_at: d.created_at,
  updated_at: d.updated_at,
});

/** A bulk write whose every failed operation hit the unique index. */
function onlyDuplicates(err: unknown): boolean {
  if (!(err instanceof MongoBulkWriteError)) return false;
  const errors = [err.writeErrors].flat();
  return errors.length > 0 && errors.every((e) => e.code === 11000);
}

/**
 * Two first upserts of one (kind, id) at once may both insert, and the unique index refuses
 * the second (E11000). Tried again, it finds the document and updates it.
 */
async function retryingDuplicate<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (!isDuplicateKey(err) && !onlyDuplicates(err)) throw err;
    return write();
  }
}

export class MongoModelStore implements ModelStore {
  constructor(private readonly models: Collection<ModelDoc>) {}

  /**
   * The rank counts are read first, so a refused advertisement records nothing. Each write then
   * also matches on the count read: a declaration that changed it meanwhile makes the upsert
   * insert a second (kind, id), which the unique index refuses, and the conflict is read again.
   * Unlike Redis's one script, the models of a call are written each on its own, so in that
   * race the others may already be recorded.
   */
  async advertise(models: ModelDescription[], at: string): Promise<RankConflict | null> {
    if (models.length === 0) return null;
    const early = await this.rankConflict(models);
    if (early) return early;
    // `ranks: null` matches a whole model's missing or null field; an upsert writes the advertised count.
    const ops = models.map((m) => ({ updateOne: { filter: { kind: m.kind, id: m.id, ranks: m.ranks ?? null }, update: advertisement(m, at), upsert: true } }));
    try {
      // Unordered: one model's failure does not hold back the others; each write is atomic on its own.
      await retryingDuplicate(() => this.models.bulkWrite(ops, { ordered: false }));
    } catch (err) {
      if (!isDuplicateKey(err) && !onlyDuplicates(err)) throw err;
      const late = await this.rankConflict(models);
      if (late) return late;
      throw err;
    }
    return null;
  }

  /** The first model of `models` the catalogue knows with another rank count. */
  private async rankConflict(models: ModelDescription[]): Promise<RankConflict | null> {
    const docs = await this.models.find({ $or: models.map((m) => ({ kind: m.kind, id: m.id })) }, { projection: { kind: 1, id: 1, ranks: 1 } }).toArray();
    const known = new Map(docs.map((d) => [`${d.kind}\n${d.id}`, ranksOf(d)]));
    for (const m of models) {
      const key = `${m.kind}\n${m.id}`;
      const advertised = m.ranks ?? null;
      const catalogue = known.get(key);
      if (catalogue !== undefined && catalogue !== advertised) return { kind: m.kind, id: m.id, catalogue, advertised };
    }
    return null;
  }

  async declare(model: ModelDescription, at: string): Promise<{ record: ModelRecord; created: boolean }> {
    const update = [
      {
        $set: {
          description: lit(model.description ?? null),
          input_schema: lit(schemaText(model)),
          ranks: lit(model.ranks ?? null),
          middle_ranks: lit(model.ranks ? (model.middle_ranks ?? DEFAULT_MIDDLE_RANKS) : null),
          declared: lit(true),
          first_seen: { $ifNull: ['$first_seen', null] },
          last_seen: { $ifNull: ['$last_seen', null] },
          created_at: { $ifNull: ['$created_at', lit(at)] },
          updated_at: lit(at),
        },
      },
    ];
    const result = await retryingDuplicate(() =>
      this.models.findOneAndUpdate({ kind: model.kind, id: model.id }, update, { upsert: true, returnDocument: 'after', includeResultMetadata: true }),
    );
    if (!result.value) throw new Error('the model upsert returned no document');
    return { record: toRecord(result.value), created: result.lastErrorObject?.updatedExisting !== true };
  }

  async get(kind: string, id: string): Promise<ModelRecord | null> {
    const doc = await this.models.findOne({ kind, id });
    return doc ? toRecord(doc) : null;
  }

  async list(kind?: string): Promise<ModelRecord[]> {
    return (await this.models.find(kind === undefined ? {} : { kind }).sort({ kind: 1, id: 1 }).toArray()).map(toRecord);
  }

  async remove(kind: string, id: string): Promise<boolean> {
    return (await this.models.deleteOne({ kind, id })).deletedCount === 1;
  }
}

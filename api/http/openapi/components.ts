import { OUTPUT_FILE_SCHEMA } from '../../../models/kinds.js';
import * as B from '../../contract/bot-schemas.js';
import * as F from '../../contract/file-schemas.js';
import * as M from '../../contract/model-schemas.js';
import * as O from '../../contract/openai-schemas.js';
import * as S from '../../contract/schemas.js';
import * as T from '../../contract/tool-schemas.js';
import { artifactUploaded } from '../routes/artifacts.js';
import { workerAttestation } from '../routes/attestation.js';
import { jobComponents } from './job-objects.js';
import { jobRequestComponents } from './job-requests.js';

/**
 * The named schemas of the document. Routes and schemas share these very objects, so wherever
 * one appears, in an operation or inside another schema, the builder puts a `$ref` to its name:
 * a schema is named here once and never copied.
 */
export function componentSchemas(): Record<string, object> {
  return {
    Error: S.errorEnvelope,
    ErrorCode: S.errorCode,
    Kind: S.kindName,
    RunStatus: S.runStatus,
    JobClass: S.jobClass,
    Confidentiality: S.confidentiality,
    ...jobRequestComponents(),
    OutputFile: OUTPUT_FILE_SCHEMA,
    ...jobComponents(),
    JobAccepted: S.jobAccepted,
    JobList: S.jobList,
    WebhookAttemptList: S.webhookAttemptList,
    WebhookSecret: S.webhookSecret,
    Account: S.account,
    ApiKey: S.apiKey,
    ApiKeyCreated: S.createdKey,
    ApiKeyList: S.keyList,
    CreateApiKeyRequest: S.createKeyBody,
    WorkerTokenCreated: S.workerTokenCreated,
    AdminCreateAccountRequest: S.adminCreateAccountBody,
    AdminAccountCreated: S.adminAccountCreated,
    AdminCreditsRequest: S.adminCreditsBody,
    AdminCreditsResult: S.adminCreditsResult,
    Operator: S.operator,
    OperatorList: S.operatorList,
    AdminCreateOperatorRequest: S.adminCreateOperatorBody,
    AdminTrustRequest: S.adminTrustBody,
    AdminOperatorCreated: S.adminOperatorCreated,
    Health: S.health,
    Capabilities: S.capabilities,
    Capacity: S.capacity,
    File: F.file,
    FileList: F.fileList,
    Model: M.model,
    ModelList: M.modelList,
    DeclareModelRequest: M.declareModelBody,
    Bot: B.bot,
    BotList: B.botList,
    BotSession: B.botSession,
    CreateBotRequest: B.createBotBody,
    BotInvokeRequest: B.invokeBody,
    BotInvokeReply: B.invokeReply,
    Tool: T.tool,
    ToolCreated: T.createdTool,
    ToolList: T.toolList,
    CreateToolRequest: T.createToolBody,
    OpenAIError: O.openAiError,
    ChatCompletionRequest: O.chatCompletionBody,
    ChatCompletion: O.chatCompletion,
    OpenAIModel: O.model,
    OpenAIModelList: O.modelList,
    ArtifactUploaded: artifactUploaded,
    WorkerAttestation: workerAttestation,
  };
}

/**
 * The component name of each named schema, by identity, for `withRefs`. The gateway answers every
 * kind with the one job object of `S.job`, which the document publishes as `Job`, one schema per
 * kind (./job-objects.ts): wherever a route or schema holds `S.job`, the document refers to `Job`.
 */
export function componentNames(components: Record<string, object>): Map<object, string> {
  return new Map<object, string>([[S.job, 'Job'], ...Object.entries(components).map(([name, schema]) => [schema, name] as [object, string])]);
}

/**
 * `schema` with every nested schema that is one of `named` (by identity) replaced by its `$ref`;
 * `self` is left whole at the top, so a component's own definition is not a reference to itself.
 */
export function withRefs(schema: unknown, named: Map<object, string>, self?: object): unknown {
  if (Array.isArray(schema)) return schema.map((s) => withRefs(s, named));
  if (schema === null || typeof schema !== 'object') return schema;
  const name = schema !== self ? named.get(schema) : undefined;
  if (name) return { $ref: `#/components/schemas/${name}` };
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, withRefs(v, named)]));
}

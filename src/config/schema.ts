/**
 * `<home>/warden.json`: the node's configuration file. Keys follow the library's own names
 * (Limits, ProviderProfile) so one spelling is used everywhere. Unknown keys are refused.
 */
import { Type, type Static } from "typebox";
import { DEFAULT_LIMITS } from "../core/limits.js";
import { EVENT_FORMATS, PERMISSION_MODES } from "../providers/profiles.js";
import { PROVIDER_NAMES } from "../providers/types.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const PositiveInt = Type.Integer({ minimum: 1 });
/** A memory bound a run can start in: an agent's runtime alone takes tens of MiB. */
const MemoryBound = Type.Integer({ minimum: 64 * 1024 * 1024, description: "bytes, at least 64 MiB" });

export const LimitsConfig = Type.Object(
  Object.fromEntries(Object.keys(DEFAULT_LIMITS).map((key) => [key, Type.Optional(PositiveInt)])),
  { additionalProperties: false },
);

export const ProviderConfig = Type.Union([
  Type.String({ minLength: 1, description: "the provider's command (PATH name or path)" }),
  Type.Object(
    {
      command: Type.Optional(Type.String({ minLength: 1 })),
      promptArgs: Type.Optional(Type.Array(Type.String())),
      bundleArgs: Type.Optional(Type.Array(Type.String())),
      bundleEnv: Type.Optional(Type.Record(Type.String(), Type.String())),
      events: Type.Optional(Type.Enum(EVENT_FORMATS)),
      permission: Type.Optional(Type.Enum(PERMISSION_MODES)),
      permissions: Type.Optional(
        Type.Object(
          Object.fromEntries(
            PERMISSION_MODES.map((m) => [
              m,
              Type.Optional(
                Type.Object({ args: Type.Array(Type.String()), env: Type.Optional(Type.Record(Type.String(), Type.String())) }, { additionalProperties: false }),
              ),
            ]),
          ),
          { additionalProperties: false },
        ),
      ),
      env: Type.Optional(Type.Record(Type.String(), Type.String())),
      model: Type.Optional(
        Type.Object(
          {
            baseUrl: Type.String({ minLength: 1 }),
            apiKeyEnv: Type.Optional(Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]*$", description: "the name of an environment variable: letters, digits and _, not starting with a digit" })),
            name: Type.Optional(Type.String({ minLength: 1 })),
            retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
          },
          { additionalProperties: false },
        ),
      ),
    },
    { additionalProperties: false },
  ),
]);

export const TokenEntry = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128, pattern: "^[A-Za-z0-9][A-Za-z0-9._@-]*$", description: "1–128 letters, digits and . _ @ -, starting with a letter or digit" }),
    role: Type.Union([Type.Literal("operator"), Type.Literal("observer")]),
    sha256: Type.String({ pattern: "^(sha256:)?[0-9a-f]{64}$", description: "the token's sha256 in 64 lowercase hex digits, \"sha256:\" before them or not" }),
  },
  { additionalProperties: false },
);
export type TokenEntry = Static<typeof TokenEntry>;

export const TokensFile = Type.Object({ tokens: Type.Array(TokenEntry) }, { additionalProperties: false });
export type TokensFile = Static<typeof TokensFile>;

const Principals = Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { minItems: 1, maxItems: 64 });

/** One trust rule (DESIGN.md "Bundle signatures"): at most one of any_of, all_of, k_of. */
export const TrustRule = Type.Object(
  {
    bundles: Type.String({ minLength: 1, maxLength: 128, description: "bundle id pattern (* and ?)" }),
    allowed_signers: Type.String({ minLength: 1, description: "OpenSSH allowed_signers file (relative: to the home)" }),
    any_of: Type.Optional(Principals),
    all_of: Type.Optional(Principals),
    k_of: Type.Optional(Type.Object({ k: PositiveInt, principals: Principals }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);

const BudgetConfig = Type.Object(
  {
    input_tokens: Type.Optional(PositiveInt),
    output_tokens: Type.Optional(PositiveInt),
    cost_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    wall_s: Type.Optional(PositiveInt),
    turns: Type.Optional(PositiveInt),
  },
  { additionalProperties: false },
);

/** Budgets and the price table (DESIGN.md "Spend"). */
export const SpendConfigFile = Type.Object(
  {
    /** model name (or `*`) → USD per million input and output tokens */
    prices: Type.Optional(
      Type.Record(
        Type.String({ minLength: 1, maxLength: 256 }),
        Type.Object({ input_per_mtok: Type.Number({ minimum: 0 }), output_per_mtok: Type.Number({ minimum: 0 }) }, { additionalProperties: false }),
      ),
    ),
    run: Type.Optional(BudgetConfig),
    workspaceDay: Type.Optional(BudgetConfig),
    principalDay: Type.Optional(BudgetConfig),
  },
  { additionalProperties: false },
);

export const ConfigFile = Type.Object(
  {
    listen: Type.Optional(Type.String({ minLength: 1 })),
    workspaces: Type.Optional(Type.Record(Type.String(), Type.String())),
    defaultWorkspace: Type.Optional(Type.String({ minLength: 1 })),
    /** workspace id → permission mode of its runs (over the provider's) */
    workspacePermissions: Type.Optional(Type.Record(Type.String(), Type.Enum(PERMISSION_MODES))),
    /** workspace ids whose own provider configuration (.claude/, .mcp.json, .codex/) may run */
    trustedWorkspaces: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 1024 })),
    /** names of the node's environment agents get besides the allowlist (DESIGN.md "Confinement") */
    agentEnv: Type.Optional(Type.Array(Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]{0,127}$", description: "the name of an environment variable: up to 128 letters, digits and _, not starting with a digit" }), { maxItems: 128 })),
    /** how runs are confined: "sandbox" (default) or "none" (recorded in every run's journal) */
    isolation: Type.Optional(Type.Enum(["sandbox", "none"])),
    /** workspace id → its runs' isolation (over `isolation`) */
    workspaceIsolation: Type.Optional(Type.Record(Type.String(), Type.Enum(["sandbox", "none"]))),
    sandbox: Type.Optional(
      Type.Object(
        {
          /** bubblewrap's path (default /usr/bin/bwrap) */
          bwrap: Type.Optional(Type.String({ minLength: 1 })),
          /** host:port every confined run may reach besides its provider's model endpoint */
          egress: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 256 })),
          /** workspace id → host:port its runs may reach besides */
          workspaceEgress: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String({ minLength: 1 }), { maxItems: 256 }))),
          limits: Type.Optional(
            Type.Object(
              {
                processes: Type.Optional(PositiveInt),
                addressSpaceBytes: Type.Optional(PositiveInt),
                cpuSeconds: Type.Optional(PositiveInt),
                fileSizeBytes: Type.Optional(PositiveInt),
                openFiles: Type.Optional(PositiveInt),
                /** a run's memory (its memory control group), bytes */
                memoryBytes: Type.Optional(MemoryBound),
                /** all runs' memory together, bytes */
                allRunsMemoryBytes: Type.Optional(MemoryBound),
                /** all runs' CPU weight against the node's own processes (cgroup v2's scale: 100 weighs as much) */
                allRunsCpuWeight: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })),
              },
              { additionalProperties: false },
            ),
          ),
          /** whether confined runs get control groups where the node can make them (default true) */
          cgroups: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
    providers: Type.Optional(
      Type.Object(Object.fromEntries(PROVIDER_NAMES.map((p) => [p, Type.Optional(ProviderConfig)])), { additionalProperties: false }),
    ),
    limits: Type.Optional(LimitsConfig),
    logLevel: Type.Optional(Type.Enum(LOG_LEVELS)),
    /** upper bound of `Prefer: wait=<s>` */
    maxWaitS: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })),
    /** how long running agents may finish at shutdown before they are killed */
    shutdownGraceS: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })),
    defaultTimeoutS: Type.Optional(PositiveInt),
    maxTimeoutS: Type.Optional(PositiveInt),
    killGraceMs: Type.Optional(PositiveInt),
    maxPromptBytes: Type.Optional(PositiveInt),
    /** largest JSON request body */
    jsonBodyBytes: Type.Optional(PositiveInt),
    /** caller names of the env tokens */
    operatorName: Type.Optional(TokenEntry.properties.name),
    observerName: Type.Optional(TokenEntry.properties.name),
    /**
     * workspace id → its tool policy (Cedar, DESIGN.md "Governed tool calls"): a file (relative: to
     * the home) for every provider, or one per provider with `default` for the others
     */
    policies: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Union([
          Type.String({ minLength: 1 }),
          Type.Object(Object.fromEntries([...PROVIDER_NAMES, "default"].map((p) => [p, Type.Optional(Type.String({ minLength: 1 }))])), { additionalProperties: false }),
        ]),
      ),
    ),
    /** how long a run parked on a policy's `ask` waits for an operator, in seconds (default 86400); past it the call is denied */
    approvalDeadlineS: Type.Optional(Type.Integer({ minimum: 1, maximum: 30 * 86_400 })),
    /** trust policy for bundle signatures: the first rule whose pattern matches a bundle id applies */
    signing: Type.Optional(Type.Object({ rules: Type.Array(TrustRule, { maxItems: 256 }) }, { additionalProperties: false })),
    /** budgets per run and per workspace and principal per day, and the price table */
    spend: Type.Optional(SpendConfigFile),
    /** the queue of submitted invocations (DESIGN.md "Queued invocations") */
    queue: Type.Optional(
      Type.Object(
        {
          /** runs this node starts from the queue at once (default: limits.activeRuns) */
          slots: Type.Optional(PositiveInt),
          /** this node's labels a submission may require */
          labels: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.String({ maxLength: 128 }))),
          /** runs going at once, fleet-wide, per workspace and per provider */
          limits: Type.Optional(Type.Object({ workspace: Type.Optional(PositiveInt), provider: Type.Optional(PositiveInt) }, { additionalProperties: false })),
          /** provider → runs started per minute, fleet-wide */
          rates: Type.Optional(Type.Object(Object.fromEntries(PROVIDER_NAMES.map((p) => [p, Type.Optional(PositiveInt)])), { additionalProperties: false })),
          /** a submission's default deadline_s (default 86400) */
          deadlineS: Type.Optional(Type.Integer({ minimum: 1, maximum: 2592000 })),
          /** how long an ended row is kept whole, s (default: the result retention, 30 days); then its request goes, its identity stays */
          retentionS: Type.Optional(Type.Integer({ minimum: 60, maximum: 3650 * 86400 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ConfigFile = Static<typeof ConfigFile>;

/** The transparency log: C2SP tlog-tiles (checkpoint, tiles, entry bundles) and proofs by API. */
import {
  CHECKPOINT_CONTENT_TYPE,
  CheckpointBody,
  ConsistencyParams,
  ConsistencyProofBody,
  InclusionParams,
  InclusionProofBody,
  LogRunParams,
  LogStatusBody,
  RunProofBody,
  TILE_CONTENT_TYPE,
  TileBody,
  TileParams,
} from "../../api/log.js";
import { ProblemResponse } from "../../api/problem.js";
import { NotFoundError } from "../../core/errors.js";
import type { TransparencyLog } from "../../tlog/log.js";
import { parseTilePath } from "../../tlog/tiles.js";
import type { App, RouteContext } from "../context.js";

const IMMUTABLE = "public, max-age=31536000, immutable";

export function logRoutes(ctx: RouteContext) {
  const logOf = (): TransparencyLog => {
    const log = ctx.warden.log;
    if (log === undefined) throw new NotFoundError("log-disabled", "this node keeps no transparency log");
    return log;
  };
  return async function logPlugin(app: App): Promise<void> {
    app.get("/v1/log", { schema: { operationId: "logStatus", summary: "The transparency log's size, key and witnesses", response: { 200: LogStatusBody, "4xx": ProblemResponse } } }, async () => logOf().status());

    app.get(
      "/v1/log/checkpoint",
      { schema: { operationId: "logCheckpoint", summary: "The latest signed checkpoint (C2SP tlog-checkpoint)", produces: [CHECKPOINT_CONTENT_TYPE], response: { 200: CheckpointBody, "4xx": ProblemResponse } } },
      async (_request, reply) => {
        const checkpoint = await logOf().latestCheckpoint();
        return reply.type(CHECKPOINT_CONTENT_TYPE).header("cache-control", "max-age=1").send(checkpoint.note);
      },
    );

    app.get(
      "/v1/log/tile/*",
      { config: { quietRequestLog: true }, schema: { operationId: "logTile", summary: "A tile or entry bundle (C2SP tlog-tiles)", params: TileParams, produces: [TILE_CONTENT_TYPE], response: { 200: TileBody, "4xx": ProblemResponse } } },
      async (request, reply) => {
        const path = request.params["*"];
        const ref = parseTilePath(path);
        const tile = ref === undefined ? undefined : await logOf().tile(ref);
        if (tile === undefined) throw new NotFoundError("log-tile-not-found", `no tile ${path} in the log's latest checkpoint`, { details: { tile: path } });
        return reply.type(TILE_CONTENT_TYPE).header("cache-control", IMMUTABLE).send(tile);
      },
    );

    app.get(
      "/v1/log/proof/inclusion/:index/:size",
      { schema: { operationId: "logInclusion", summary: "The inclusion proof of a leaf in the tree of a size", params: InclusionParams, response: { 200: InclusionProofBody, "4xx": ProblemResponse } } },
      async (request) => logOf().inclusion(Number(request.params.index), Number(request.params.size)),
    );

    app.get(
      "/v1/log/proof/consistency/:old/:size",
      { schema: { operationId: "logConsistency", summary: "The consistency proof between two tree sizes", params: ConsistencyParams, response: { 200: ConsistencyProofBody, "4xx": ProblemResponse } } },
      async (request) => logOf().consistency(Number(request.params.old), Number(request.params.size)),
    );

    app.get(
      "/v1/log/runs/:run_id",
      { schema: { operationId: "logRunProof", summary: "A run's logged seal with its inclusion proof and cosigned checkpoint", params: LogRunParams, response: { 200: RunProofBody, "4xx": ProblemResponse } } },
      async (request) => logOf().runProof(request.params.run_id.toLowerCase()),
    );

    app.get(
      "/v1/log/reconciliations/:run_id",
      {
        schema: {
          operationId: "logReconciliationProof",
          summary: "The logged reconciliation of a run (its receipt's run.reconciled leaf) with its inclusion proof and cosigned checkpoint",
          params: LogRunParams,
          response: { 200: RunProofBody, "4xx": ProblemResponse },
        },
      },
      async (request) => logOf().reconciliationProof(request.params.run_id.toLowerCase()),
    );
  };
}

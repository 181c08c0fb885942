/** The bundle catalog (observers may read it) and materializations for a provider. */
import { NoContent } from "../../api/common.js";
import { ProblemResponse } from "../../api/problem.js";
import {
  BundleList,
  BundleParams,
  BundleView,
  Manifest,
  MaterializationBody,
  MaterializationParams,
  MaterializationReply,
  ProviderPlans,
  RetirementReply,
  RevisionParams,
  RevisionView,
  SignatureBody,
} from "../../api/delivery.js";
import type { App, RouteContext } from "../context.js";

export function bundleRoutes(ctx: RouteContext) {
  const { warden } = ctx;

  return async function bundlesPlugin(app: App): Promise<void> {
    app.get("/v1/bundles", { schema: { operationId: "listBundles", summary: "Committed bundles with their revisions and receipts", response: { 200: BundleList, "4xx": ProblemResponse } } }, async () => ({
      bundles: await warden.listBundles(),
    }));

    app.get(
      "/v1/bundles/:bundle_id",
      { schema: { operationId: "getBundle", summary: "One bundle's revisions with receipts", params: BundleParams, response: { 200: BundleView, "4xx": ProblemResponse } } },
      async (request) => warden.showBundle(request.params.bundle_id),
    );

    app.get(
      "/v1/bundles/:bundle_id/:revision/manifest",
      { schema: { operationId: "getRevisionManifest", summary: "The manifest a revision was committed with: every file's path, kind, scope, digest and size", params: RevisionParams, response: { 200: Manifest, "4xx": ProblemResponse } } },
      async (request) => warden.revisionManifest(request.params.bundle_id, request.params.revision),
    );

    app.get(
      "/v1/bundles/:bundle_id/:revision/providers",
      {
        schema: {
          operationId: "getRevisionProviders",
          summary: "What each provider would get from a revision (the materializer's own planning; nothing is written), or its refusal",
          params: RevisionParams,
          response: { 200: ProviderPlans, "4xx": ProblemResponse },
        },
      },
      async (request) => ({ providers: await warden.materializationPlans(request.params.bundle_id, request.params.revision) }),
    );

    app.post(
      "/v1/bundles/:bundle_id/:revision/materializations",
      {
        config: { bodyCodes: "materialization" },
        schema: {
          operationId: "materializeRevision", summary: "Materialize a committed revision for a provider",
          params: RevisionParams,
          body: MaterializationBody,
          response: { 201: MaterializationReply, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        const m = await warden.materialize(request.params.bundle_id, request.params.revision, request.body.provider);
        return reply.code(201).send({ session: m.session, root: m.root, args: m.args, env: m.env });
      },
    );

    app.post(
      "/v1/bundles/:bundle_id/:revision/signatures",
      {
        config: { bodyCodes: "signature" },
        schema: {
          operationId: "addSignature",
          summary: "Add a signature to a committed revision (a second signer, a release manager)",
          params: RevisionParams,
          body: SignatureBody,
          response: { 200: RevisionView, "4xx": ProblemResponse },
        },
      },
      async (request) => warden.addSignature(request.params.bundle_id, request.params.revision, request.body.signature),
    );

    app.post(
      "/v1/bundles/:bundle_id/:revision/retirement",
      {
        schema: {
          operationId: "retireRevision", summary: "Retire a revision (refused to new sessions, still listed) and delete the blobs nothing live references any more",
          params: RevisionParams,
          response: { 200: RetirementReply, "4xx": ProblemResponse },
        },
      },
      async (request) => {
        const { bundle_id, revision } = request.params;
        const collected = await warden.retireRevision(bundle_id, revision);
        return { bundle_id, revision, retired: true as const, collected_blobs: collected };
      },
    );

    app.delete(
      "/v1/materializations/:session",
      {
        schema: {
          operationId: "releaseMaterialization", summary: "Remove a materialized tree no longer used (the node keeps limits.materializations at once)",
          params: MaterializationParams,
          response: { 204: NoContent, "4xx": ProblemResponse },
        },
      },
      async (request, reply) => {
        await warden.releaseMaterialization(request.params.session.toLowerCase());
        return reply.code(204).send(null);
      },
    );
  };
}

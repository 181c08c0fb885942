/** `warden attest RUN`: the node's signed in-toto statement about a run's change set (DESIGN.md "Attestations"). */
import type { Command } from "commander";
import { ValidationError } from "../../core/errors.js";
import type { CliContext } from "../context.js";
import { connect, nodeOptions, type NodeFlags } from "../node.js";
import { EXIT_OK, runCommand, type OutputFlags } from "../outcome.js";

interface AttestFlags extends NodeFlags, OutputFlags {
  statement?: boolean;
}

export function registerAttestCommand(program: Command, ctx: CliContext): void {
  nodeOptions(
    program
      .command("attest")
      .description(
        "print the node's attestation of a run: an in-toto Statement v1 about its change set (base commit, bundle, provider, " +
          "isolation, journal head, log leaf) in a DSSE envelope signed with the node's Ed25519 key (GET /v1/keys)",
      )
      .argument("<run_id>", "the run")
      .option("--statement", "print the signed statement (pretty JSON) instead of the envelope, once its signature is checked")
      .option("--json", "the envelope as one line of JSON (the default output already is)"),
  ).action((runId: string, flags: AttestFlags) => runCommand(ctx, flags, () => attest(ctx, runId, flags)));
}

async function attest(ctx: CliContext, runId: string, flags: AttestFlags): Promise<number> {
  const client = await connect(ctx.io, flags);
  const envelope = await client.runAttestation(runId);
  // Checked here against the keys the node publishes before it is printed: a node (or a proxy)
  // handing out an envelope its own keys do not verify is an error, not an attestation.
  const [{ verifyEnvelope, envelopeJson }, keys] = await Promise.all([import("../../attestation/dsse.js"), client.keys()]);
  const verified = verifyEnvelope(envelope, keys);
  const statement = JSON.parse(verified.payload.toString("utf8")) as { predicate?: { run_id?: unknown } };
  if (statement.predicate?.run_id !== runId.toLowerCase()) {
    throw new ValidationError("attestation-run-mismatch", `the node's attestation is about run ${String(statement.predicate?.run_id)}, not ${runId}`, { status: 422 });
  }
  ctx.io.stdout(flags.statement === true ? `${JSON.stringify(statement, null, 2)}\n` : `${envelopeJson(envelope)}\n`);
  return EXIT_OK;
}

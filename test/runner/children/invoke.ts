/**
 * A node process for the crash tests: opens the node state under argv[2], pushes the test
 * bundle, invokes (scope, argv[3]) with the JSON request in argv[4] and prints the outcome as one
 * JSON line. The test kills it with SIGKILL mid-run, then runs it again as the "restarted node".
 */
import { fullBundleFiles } from "../../providers/helpers.js";
import { SCOPE, openRunnerEnv, pushBundle } from "../helpers.js";

const [root, id, requestJson] = process.argv.slice(2) as [string, string, string];
const env = await openRunnerEnv(root);
await pushBundle(env.delivery, "review-tools", "r1", fullBundleFiles());
process.stdout.write("ready\n");
const outcome = await env.runner.invoke({ scope: SCOPE, id, request: JSON.parse(requestJson) as unknown });
process.stdout.write(`${JSON.stringify(outcome)}\n`);
await env.close();

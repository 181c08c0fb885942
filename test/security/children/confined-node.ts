// A node (default confinement) that runs one hostile agent and waits for it: the parent test
// kills this process with SIGKILL while the agent runs. argv: home workspace id prompt
import { openWarden } from "../../../src/warden/facade.js";
import { fileURLToPath } from "node:url";

const [home, workspace, id, prompt] = process.argv.slice(2) as [string, string, string, string];
const HOSTILE = fileURLToPath(new URL("../../fixtures/agents/hostile.mjs", import.meta.url));
const warden = await openWarden({ home, workspaces: { main: workspace }, providers: { kimi: { command: HOSTILE, promptArgs: ["--", "{prompt}"] } } });
await warden.invoke("test", id, { provider: "kimi", prompt });

/** The real codex CLI end to end under warden (real-agent.ts). */
import { describeRealAgent } from "./real-agent.js";

describeRealAgent("codex");

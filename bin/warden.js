#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm run build`, run by `prepare`).
import { main } from "../dist/src/cli/main.js";
main(process.argv).then((code) => { process.exitCode = code; });

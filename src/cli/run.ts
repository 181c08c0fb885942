/** The executable entry (bin/warden.cjs imports the built copy of this module). */
import { main } from "./main.js";

process.exitCode = await main(process.argv);

// A `serve` that failed has printed its one line and has nothing left to do, but a database
// connection it was opening may still hold the process: one that asked for a password the URL does
// not hold keeps its socket until the server's own authentication timeout (a minute). Other
// commands end by themselves, and forcing them out could cut their output to a slow pipe.
if (process.argv[2] === "serve" && process.exitCode !== 0) setTimeout(() => process.exit(), 1000).unref();

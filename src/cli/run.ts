/** The executable entry (bin/warden.cjs imports the built copy of this module). */
import { main } from "./main.js";

process.exitCode = await main(process.argv);

#!/usr/bin/env node
// The installed `switchyard` command runs the built JavaScript; in this repository `npm run serve`
// runs the TypeScript sources instead, so a clean clone needs no build step.
import { main } from "../dist/cli.js";

await main(process.argv.slice(2));

// The http_get plugin's entry point: its options from the command line
// (kernel.yaml's args), then serve(). `npm run build` bundles it, with the
// SDK and gRPC, into one file: the plugin's whole directory.
//
//   args: [--allow, api.github.com, --allow, "*.example.com", --dir, downloads]

import { serve } from "@agentkernel/plugin-sdk";
import { resolve } from "node:path";
import { Options, tools } from "./http";

function options(argv: string[]): Options {
  const opts: Options = { allow: [] };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if ((flag === "--allow" || flag === "--dir") && value === undefined) throw new Error(`http_get: ${flag} needs a value`);
    if (flag === "--allow") opts.allow.push(value);
    else if (flag === "--dir") opts.dir = resolve(value);
    else throw new Error(`http_get: unknown argument ${JSON.stringify(flag)} (want --allow HOST[:PORT] and --dir DIR)`);
    i++;
  }
  return opts;
}

void serve(tools(options(process.argv.slice(2))));

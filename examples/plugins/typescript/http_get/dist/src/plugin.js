"use strict";
// The http_get plugin's entry point: its options from the command line
// (kernel.yaml's args), then serve(). `npm run build` bundles it, with the
// SDK and gRPC, into one file: the plugin's whole directory.
//
//   args: [--allow, api.github.com, --allow, "*.example.com", --dir, downloads]
Object.defineProperty(exports, "__esModule", { value: true });
const plugin_sdk_1 = require("@agentkernel/plugin-sdk");
const node_path_1 = require("node:path");
const http_1 = require("./http");
function options(argv) {
    const opts = { allow: [] };
    for (let i = 0; i < argv.length; i++) {
        const [flag, value] = [argv[i], argv[i + 1]];
        if ((flag === "--allow" || flag === "--dir") && value === undefined)
            throw new Error(`http_get: ${flag} needs a value`);
        if (flag === "--allow")
            opts.allow.push(value);
        else if (flag === "--dir")
            opts.dir = (0, node_path_1.resolve)(value);
        else
            throw new Error(`http_get: unknown argument ${JSON.stringify(flag)} (want --allow HOST[:PORT] and --dir DIR)`);
        i++;
    }
    return opts;
}
void (0, plugin_sdk_1.serve)((0, http_1.tools)(options(process.argv.slice(2))));
//# sourceMappingURL=plugin.js.map
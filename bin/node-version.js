// The Node.js versions Hearth runs on (package.json `engines`: ^22.20.0 || ^24.12.0). Below 22.20 the process
// would not fail with an error but die: better-sqlite3 13's prebuilt addon needs Node-API 10, and Node 20
// segfaults loading it. So the CLI and the test runner refuse such a Node first, saying what to run instead.
const MIN = [22, 20];

export function assertSupportedNode(version = process.versions.node) {
  const [major, minor] = version.split('.').map(Number);
  if (major > MIN[0] || (major === MIN[0] && minor >= MIN[1])) return;
  throw new Error(`Hearth needs Node.js 22 (22.20 or later) or 24; this is ${version}. See docs/configuration.md (Installing).`);
}

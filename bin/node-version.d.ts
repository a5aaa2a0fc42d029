// Types of bin/node-version.js (plain JS: bin/hearth.js runs it before any TypeScript loader is registered).
/** Throws, naming the version, for a Node.js below 22.20 (package.json `engines`). Default: the running one. */
export function assertSupportedNode(version?: string): void;

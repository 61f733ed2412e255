// Preload for the MCP conformance CLI: node --import ./preload.mjs <cli> ...
//
// @modelcontextprotocol/conformance 0.1.16 is one ES module that starts with
// `import { globSync, ... } from "fs"`. fs.globSync appeared in Node 22, so on
// Node 20 the CLI dies while loading ("does not provide an export named
// 'globSync'"). Only its tier-check subcommand calls globSync, so on such a
// Node we hand that package a copy of node:fs with a globSync that throws.
// On Node >= 22 this file does nothing.
import { register } from 'node:module';
import fs from 'node:fs';

if (typeof fs.globSync !== 'function') {
  const fsWithGlobSync = `
    import fs from 'node:fs';
    export * from 'node:fs';
    export default fs;
    export function globSync() {
      throw new Error('fs.globSync needs Node >= 22 (only "conformance tier-check" uses it)');
    }`;
  // Module hooks run in their own thread, so they travel as source text.
  const hooks = `
    const replacement = ${JSON.stringify('data:text/javascript,' + encodeURIComponent(fsWithGlobSync))};
    export async function resolve(specifier, context, next) {
      const fromSuite = context.parentURL?.includes('/node_modules/@modelcontextprotocol/conformance/');
      if (fromSuite && (specifier === 'fs' || specifier === 'node:fs')) {
        return { url: replacement, shortCircuit: true };
      }
      return next(specifier, context);
    }`;
  register('data:text/javascript,' + encodeURIComponent(hooks));
}
